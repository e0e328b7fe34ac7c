"""loopwright: a fast, durable, safe agent-loop runtime.

>>> from loopwright import Agent, tool
"""

from loopwright.agent import Agent
from loopwright.approvals import ApprovalDecision, ApprovalMismatchError, ApprovalRequest
from loopwright.caller import Caller
from loopwright.config import LoopConfig
from loopwright.context.registry import ContextLayer, ContextRegistry
from loopwright.errors import (
    AgentDefinitionError,
    ConfigError,
    ContextLengthExceededError,
    EmptyMessageError,
    InputError,
    LoopwrightError,
    MessageTooLargeError,
    ModelError,
    NotFoundError,
    RunError,
    RunTimeoutError,
    SessionBusyError,
    StorageError,
)
from loopwright.events import (
    ApprovalRequested,
    ApprovalResolved,
    ContextBuilt,
    ExecuteStarted,
    LimitReached,
    ModelFallback,
    ModelRetry,
    PersistStarted,
    RunEnded,
    RunEvent,
    RunFailed,
    RunStarted,
    StepDiscarded,
    StepEnded,
    StepStarted,
    TextChunk,
    ThinkingChunk,
    ToolCallEnded,
    ToolCallStarted,
)
from loopwright.guardrails import Guardrail, GuardrailContext, GuardrailDecision, guardrail
from loopwright.hooks import HookBus, StopRun
from loopwright.limits import RunLimits
from loopwright.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, Usage, UserMessage
from loopwright.models.base import Model, ModelRequest, ModelResponse
from loopwright.permissions import PermissionPolicy
from loopwright.report import RunReport, StepReport, ToolCallReport
from loopwright.tools._function import FunctionTool, tool
from loopwright.tools.base import Tool, ToolContext, Toolset
from loopwright.workspace import Workspace, init_workspace

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentDefinitionError",
    "ApprovalDecision",
    "ApprovalMismatchError",
    "ApprovalRequest",
    "ApprovalRequested",
    "ApprovalResolved",
    "AssistantMessage",
    "Caller",
    "ConfigError",
    "ContextBuilt",
    "ContextLayer",
    "ContextLengthExceededError",
    "ContextRegistry",
    "EmptyMessageError",
    "ExecuteStarted",
    "FunctionTool",
    "Guardrail",
    "GuardrailContext",
    "GuardrailDecision",
    "HookBus",
    "InputError",
    "LimitReached",
    "LoopConfig",
    "LoopwrightError",
    "Message",
    "MessageTooLargeError",
    "Model",
    "ModelError",
    "ModelFallback",
    "ModelRequest",
    "ModelResponse",
    "ModelRetry",
    "NotFoundError",
    "PermissionPolicy",
    "PersistStarted",
    "RunEnded",
    "RunError",
    "RunEvent",
    "RunFailed",
    "RunLimits",
    "RunReport",
    "RunStarted",
    "RunTimeoutError",
    "SessionBusyError",
    "StepDiscarded",
    "StepEnded",
    "StepReport",
    "StepStarted",
    "StopRun",
    "StorageError",
    "TextChunk",
    "ThinkingChunk",
    "Tool",
    "ToolCall",
    "ToolCallEnded",
    "ToolCallReport",
    "ToolCallStarted",
    "ToolContext",
    "ToolResultMessage",
    "Toolset",
    "Usage",
    "UserMessage",
    "Workspace",
    "__version__",
    "guardrail",
    "init_workspace",
    "tool",
]
