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

__all__ = [
    "AgentInfo",
    "FunctionModel",
    "ScriptedModel",
    "TestModel",
    "Turn",
    "example_for_schema",
    "response_events",
]
