"""Context assembly: the system prompt, history repair, token estimates and compaction rules."""

from loopwright.context.pairing import repair_pairing
from loopwright.context.prompt import compose_system_prompt, dynamic_layers, stable_layers
from loopwright.context.registry import ContextLayer, ContextRegistry, LayerCycleError
from loopwright.context.tokens import estimate_tokens

__all__ = [
    "ContextLayer",
    "ContextRegistry",
    "LayerCycleError",
    "compose_system_prompt",
    "dynamic_layers",
    "estimate_tokens",
    "repair_pairing",
    "stable_layers",
]
