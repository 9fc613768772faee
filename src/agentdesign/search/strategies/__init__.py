"""Search strategies: the interface every strategy implements (propose from the history, learn from
it), the built-in ones, their registry, the meta agent and the prompt refiner, and the conformance
check every strategy passes."""

from __future__ import annotations

from agentdesign.search.strategies._base import (
    OBJECTIVES,
    History,
    Proposal,
    StartUp,
    Strategy,
    Trial,
    softmax,
)
from agentdesign.search.strategies._conformance import check_strategy
from agentdesign.search.strategies._drive import Evaluate, Evaluated, drive
from agentdesign.search.strategies._evolution import EvolutionStrategy
from agentdesign.search.strategies._guided import GuidedStrategy
from agentdesign.search.strategies._mcts import MctsStrategy
from agentdesign.search.strategies._meta import (
    META_STATUSES,
    MetaAgent,
    MetaOutcome,
    RunView,
    item_front,
)
from agentdesign.search.strategies._meta_search import MetaStrategy
from agentdesign.search.strategies._optuna import ask_trial, history_from_study, report_items
from agentdesign.search.strategies._refine import Failure, PromptRefiner, Refinement
from agentdesign.search.strategies._registry import (
    STRATEGIES,
    OptunaStrategy,
    RegisteredStrategy,
    check_refinable,
    make_strategy,
    register_strategy,
    supports_refinement,
)
from agentdesign.search.strategies._reply import DesignReader, ReadDesign, parse_designs

__all__ = [
    "META_STATUSES",
    "OBJECTIVES",
    "STRATEGIES",
    "DesignReader",
    "Evaluate",
    "Evaluated",
    "EvolutionStrategy",
    "Failure",
    "GuidedStrategy",
    "History",
    "MctsStrategy",
    "MetaAgent",
    "MetaOutcome",
    "MetaStrategy",
    "OptunaStrategy",
    "PromptRefiner",
    "Proposal",
    "ReadDesign",
    "Refinement",
    "RegisteredStrategy",
    "RunView",
    "StartUp",
    "Strategy",
    "Trial",
    "ask_trial",
    "check_refinable",
    "check_strategy",
    "drive",
    "history_from_study",
    "item_front",
    "make_strategy",
    "parse_designs",
    "register_strategy",
    "report_items",
    "softmax",
    "supports_refinement",
]
