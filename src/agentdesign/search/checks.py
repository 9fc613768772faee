"""The conformance kit, as scikit-learn's `check_estimator`: run these on your own component,
benchmark or strategy (the built-ins pass them in agentdesign's tests).

    from agentdesign.search.checks import check_benchmark, check_component, check_strategy

Each raises `ConformanceError` (an AssertionError) naming the first rule broken.
"""

from __future__ import annotations

from agentdesign.components import ConformanceError, check_component
from agentdesign.evaluators import check_benchmark
from agentdesign.search.strategies import check_strategy

__all__ = ["ConformanceError", "check_benchmark", "check_component", "check_strategy"]
