"""Context assembly: the system prompt, history repair and token estimates."""

from loopwright.context.pairing import repair_pairing
from loopwright.context.prompt import PromptLayer, compose_system_prompt, default_layers
from loopwright.context.tokens import estimate_tokens

__all__ = ["PromptLayer", "compose_system_prompt", "default_layers", "estimate_tokens", "repair_pairing"]
