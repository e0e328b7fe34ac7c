"""Exceptions raised by loopwright.

Every exception derives from :class:`LoopwrightError`. The tree::

    LoopwrightError
    ├── ConfigError                  configuration or agent definition is invalid (before any side effect)
    │   ├── AgentDefinitionError     AGENT.md frontmatter failed validation (``.problems`` lists each field)
    │   └── PriceTableError          a price table (shipped or overridden) is invalid (in models.pricing)
    ├── InputError                   the message itself is unacceptable (before any side effect)
    │   ├── EmptyMessageError
    │   └── MessageTooLargeError
    ├── NotFoundError                an agent, session or run that does not exist
    └── RunError                     something failed while a run was under way
        ├── ModelError               a provider call failed (``.provider``, ``.model``, ``.status``)
        │   └── ContextLengthExceededError   the request did not fit the model's context window
        ├── SessionBusyError         the session is locked by another run (queue full or wait timed out)
        ├── StorageError             the session store could not read or write
        ├── ContextOverflowError     the context cannot fit the model's window, even after compaction
        └── RunTimeoutError          the run exceeded its execution timeout

Signals the *model* should see — a tool that raised, arguments that did not validate, an unknown tool,
a denied call — are never exceptions: they become error tool results fed back to the model.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AgentDefinitionError",
    "ConfigError",
    "ContextLengthExceededError",
    "ContextOverflowError",
    "EmptyMessageError",
    "FieldProblem",
    "InputError",
    "LoopwrightError",
    "MessageTooLargeError",
    "ModelError",
    "NotFoundError",
    "RunError",
    "RunTimeoutError",
    "SessionBusyError",
    "StorageError",
]


class LoopwrightError(Exception):
    """Base class of every loopwright exception."""


class ConfigError(LoopwrightError):
    """Configuration is invalid; raised before anything is written or called."""


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One invalid field of a configuration file: where it is and what is wrong with it."""

    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.field}: {self.message}"


class AgentDefinitionError(ConfigError):
    """AGENT.md could not be used. ``problems`` names each bad field with its line."""

    def __init__(self, path: str, problems: list[FieldProblem]) -> None:
        self.path = path
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"invalid agent definition {path!r}:\n{lines}")


class InputError(LoopwrightError):
    """The input message was rejected before a run started."""


class EmptyMessageError(InputError):
    def __init__(self) -> None:
        super().__init__("message is empty: send some text")


class MessageTooLargeError(InputError):
    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"message is {size} bytes, over the limit of {limit} bytes")


class NotFoundError(LoopwrightError):
    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name!r} not found")


class RunError(LoopwrightError):
    """A failure during a run."""


class ModelError(RunError):
    """A model provider call failed after any retries."""

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        model: str,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        code: str | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        """Seconds the provider asked us to wait before retrying, if it said."""
        self.code = code
        """The provider's error code (``rate_limit_exceeded``, ``context_length_exceeded``, ...)."""
        status_part = f" (HTTP {status})" if status is not None else ""
        super().__init__(f"{provider} model {model!r} failed{status_part}: {message}")


class ContextLengthExceededError(ModelError):
    """The provider refused the request because it exceeds the model's context window."""


class SessionBusyError(RunError):
    """The session is running another run and this request could not wait for it."""

    def __init__(self, session_id: str, reason: str, retry_after: float | None = None) -> None:
        self.session_id = session_id
        self.retry_after = retry_after
        super().__init__(f"session {session_id!r} is busy: {reason}")


class StorageError(RunError):
    """The session store failed to read or write."""


class ContextOverflowError(RunError):
    """The context does not fit the model's window, even after compaction. Nothing was written."""

    def __init__(self, tokens: int, limit: int, detail: str = "") -> None:
        self.tokens = tokens
        self.limit = limit
        extra = f": {detail}" if detail else ""
        super().__init__(f"the context needs about {tokens} tokens, over the {limit} available{extra}")


class RunTimeoutError(RunError):
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        super().__init__(f"run exceeded its execution timeout of {timeout:g} s")
