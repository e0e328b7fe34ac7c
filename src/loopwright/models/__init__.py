"""Model providers: the :class:`Model` contract, the providers, and resolution from a name.

``resolve_model("test")``, ``resolve_model("openai:gpt-4o")``,
``resolve_model("openai-compatible:llama3", base_url="http://127.0.0.1:8000/v1")``.
"""

from typing import TYPE_CHECKING, Any

from loopwright.models._accumulate import StepAccumulator, complete_from_stream
from loopwright.models._registry import KNOWN_FORMS, resolve_chain, resolve_model
from loopwright.models.base import (
    FinishReason,
    Model,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamFinish,
    TextDelta,
    ThinkingDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    ToolDefinition,
    UsageUpdate,
)
from loopwright.models.pricing import Price, PriceTable, PriceTableError

if TYPE_CHECKING:
    from loopwright.models.openai import OpenAIModel, ProviderHTTPError


def __getattr__(name: str) -> Any:
    # Providers load their SDK (openai: about 0.8 s) only when first used, so `loopwright --version`
    # and offline runs start fast.
    if name in ("OpenAIModel", "ProviderHTTPError"):
        from loopwright.models import openai

        return getattr(openai, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "KNOWN_FORMS",
    "FinishReason",
    "Model",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OpenAIModel",
    "Price",
    "PriceTable",
    "PriceTableError",
    "ProviderHTTPError",
    "StepAccumulator",
    "StreamFinish",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallArgsDelta",
    "ToolCallStart",
    "ToolDefinition",
    "UsageUpdate",
    "complete_from_stream",
    "resolve_chain",
    "resolve_model",
]
