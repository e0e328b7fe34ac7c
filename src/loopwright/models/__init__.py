"""Model providers: the :class:`Model` contract, the providers, and resolution from a name.

``resolve_model("test")``, ``resolve_model("openai:gpt-4o")``,
``resolve_model("openai-compatible:llama3", base_url="http://127.0.0.1:8000/v1")``.
"""

from loopwright.models._accumulate import StepAccumulator, complete_from_stream
from loopwright.models._registry import KNOWN_FORMS, resolve_model
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
from loopwright.models.openai import OpenAIModel, ProviderHTTPError

__all__ = [
    "KNOWN_FORMS",
    "FinishReason",
    "Model",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OpenAIModel",
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
    "resolve_model",
]
