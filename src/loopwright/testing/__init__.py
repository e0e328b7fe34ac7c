"""Public test helpers: offline models, and a local server speaking providers' wire formats."""

from loopwright.testing._models import (
    AgentInfo,
    FunctionModel,
    ScriptedModel,
    TestModel,
    Turn,
    example_for_schema,
    response_events,
)
from loopwright.testing._replay import ReplayMismatch, ReplayModel
from loopwright.testing._server import (
    ReplayRequest,
    ReplayResponse,
    ReplayServer,
    Responder,
    openai_chat_completion,
    openai_chat_stream,
    recorded_body,
    recording_responses,
)

__all__ = [
    "AgentInfo",
    "FunctionModel",
    "ReplayMismatch",
    "ReplayModel",
    "ReplayRequest",
    "ReplayResponse",
    "ReplayServer",
    "Responder",
    "ScriptedModel",
    "TestModel",
    "Turn",
    "example_for_schema",
    "openai_chat_completion",
    "openai_chat_stream",
    "recorded_body",
    "recording_responses",
    "response_events",
]
