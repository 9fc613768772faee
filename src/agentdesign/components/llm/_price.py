"""What a model's tokens cost, from litellm's price table: read once per model, so that an estimate
or a dollar budget prices every call alike. A model the table does not price, or prices at nothing
(an embedded model, a local server), has no price: its dollars are unknown, never $0 as if known.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from agentdesign.components.llm._llm import import_litellm

__all__ = ["TokenPrice", "token_price"]


@dataclass(frozen=True)
class TokenPrice:
    """Dollars per prompt token and per completion token of one model."""

    prompt: float
    completion: float

    def dollars(self, prompt_tokens: float, completion_tokens: float) -> float:
        return prompt_tokens * self.prompt + completion_tokens * self.completion


@functools.cache
def token_price(model: str) -> TokenPrice | None:
    """`model`'s price in litellm's table (looked up once per model), or None where it has none:
    an embedded model, one the table does not list, one it lists at $0 (a local server)."""
    if model.startswith("embedded/"):  # in this process, on this machine's CPU
        return None
    litellm = import_litellm()
    try:
        info = litellm.get_model_info(model)
    except Exception:  # litellm raises for a model missing from its table: no price
        return None
    price = TokenPrice(
        prompt=float(info.get("input_cost_per_token") or 0.0),
        completion=float(info.get("output_cost_per_token") or 0.0),
    )
    return price if price.prompt > 0 or price.completion > 0 else None
