"""Search over agent designs: the design space, the value model, strategies, the resumable search
loop, and replaying searches against recorded tables."""

from __future__ import annotations

from agentdesign.search._api import Candidate, Search, create_search, load_search
from agentdesign.search._base import (
    OBJECTIVES,
    History,
    Observation,
    Proposal,
    Strategy,
    ask_trial,
    crossover,
    history_from_study,
    merge_prompts,
    mutate,
    pairwise_design,
)
from agentdesign.search._config import Budget, RunConfig
from agentdesign.search._evaluation import evaluate_agent
from agentdesign.search._evolution import EvolutionStrategy
from agentdesign.search._guided import GuidedStrategy
from agentdesign.search._mcts import MctsStrategy
from agentdesign.search._meta import (
    META_STATUSES,
    MetaAgent,
    MetaOutcome,
    MetaStrategy,
    item_front,
)
from agentdesign.search._prior import labelled_from_archive
from agentdesign.search._racing import Racing
from agentdesign.search._refine import Failure, PromptRefiner, Refinement
from agentdesign.search._replay import (
    ReplayResult,
    held_out_accuracy,
    replay_search,
    shuffled_replay,
    split_half_reliability,
)
from agentdesign.search._reply import parse_designs
from agentdesign.search._reporting import Reporter, RunSummary
from agentdesign.search._runs import finalize_run, resume_search, run_search, run_worker
from agentdesign.search._space import (
    SPACE_PRESETS,
    SearchSpace,
    prompt_params,
    space_from_option,
    unsuited_components,
)
from agentdesign.search._strategies import (
    STRATEGIES,
    OptunaStrategy,
    RegisteredStrategy,
    make_strategy,
    register_strategy,
    supports_refinement,
)
from agentdesign.search._table import (
    CELLS_FORMAT,
    REPLAY_FORMAT,
    ReplayDesign,
    ReplayTable,
    Usage,
    load_tables,
    save_cells,
)
from agentdesign.search._value import (
    Domain,
    Labelled,
    ValueModel,
    ValueReport,
    assess_value_model,
    design_features,
    rank_correlation,
)
from agentdesign.search._verdict import BaselineVerdict, RunVerdict, run_verdict

__all__ = [
    "CELLS_FORMAT",
    "META_STATUSES",
    "OBJECTIVES",
    "REPLAY_FORMAT",
    "SPACE_PRESETS",
    "STRATEGIES",
    "BaselineVerdict",
    "Budget",
    "Candidate",
    "Domain",
    "EvolutionStrategy",
    "Failure",
    "GuidedStrategy",
    "History",
    "Labelled",
    "MctsStrategy",
    "MetaAgent",
    "MetaOutcome",
    "MetaStrategy",
    "Observation",
    "OptunaStrategy",
    "PromptRefiner",
    "Proposal",
    "Racing",
    "Refinement",
    "RegisteredStrategy",
    "ReplayDesign",
    "ReplayResult",
    "ReplayTable",
    "Reporter",
    "RunConfig",
    "RunSummary",
    "RunVerdict",
    "Search",
    "SearchSpace",
    "Strategy",
    "Usage",
    "ValueModel",
    "ValueReport",
    "ask_trial",
    "assess_value_model",
    "create_search",
    "crossover",
    "design_features",
    "evaluate_agent",
    "finalize_run",
    "held_out_accuracy",
    "history_from_study",
    "item_front",
    "labelled_from_archive",
    "load_search",
    "load_tables",
    "make_strategy",
    "merge_prompts",
    "mutate",
    "pairwise_design",
    "parse_designs",
    "prompt_params",
    "rank_correlation",
    "register_strategy",
    "replay_search",
    "resume_search",
    "run_search",
    "run_verdict",
    "run_worker",
    "save_cells",
    "shuffled_replay",
    "space_from_option",
    "split_half_reliability",
    "supports_refinement",
    "unsuited_components",
]
