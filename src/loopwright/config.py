"""Loop configuration: one :class:`LoopConfig` with the specification's defaults.

Values come from four places; the first that sets a field wins:

1. explicit overrides (CLI flags, ``Agent(config=...)`` keyword arguments),
2. environment variables ``LOOPWRIGHT_<FIELD>`` (for example ``LOOPWRIGHT_MAX_TOOL_ITERATIONS=20``),
3. the ``AGENT.md`` frontmatter (snake_case or the specification's camelCase names),
4. the defaults below.

Durations are in seconds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from loopwright.errors import ConfigError

__all__ = ["ENV_PREFIX", "LoopConfig", "QueueMode"]

QueueMode = Literal["queue", "drop", "interrupt", "followup", "collect", "steer"]

ENV_PREFIX = "LOOPWRIGHT_"

#: Largest user message accepted (UTF-8 bytes): a quarter of the
#: gateway's 1 MiB request limit, leaving room for JSON escaping; about 64k tokens of English text.
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024


class LoopConfig(BaseModel):
    """Limits and timeouts of the agent loop."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    # context limits (tokens)
    context_window: int = Field(128_000, gt=0)
    reserve_floor: int = Field(4_000, ge=0)
    flush_threshold: int = Field(8_000, ge=0)
    # execution limits
    max_tool_iterations: int = Field(10, ge=1)
    execution_timeout: float = Field(600.0, gt=0)
    tool_timeout: float = Field(30.0, gt=0)
    approval_timeout: float = Field(120.0, gt=0)
    """How long a tool call marked ``ask`` waits for a decision before it is denied (the wait counts
    toward ``execution_timeout``)."""
    # queue settings
    queue_mode: QueueMode = "queue"
    """What a message does when its session is busy: see docs/concurrency.md."""
    collect_debounce: float = Field(0.5, ge=0)
    """``collect`` mode: how long to wait for more messages before delivering the batch."""
    queue_timeout: float = Field(30.0, ge=0)
    max_concurrent_runs: int = Field(0, ge=0)
    """The global lane: at most this many runs of the agent at once across sessions (0: no cap)."""
    max_queue_depth: int = Field(10, ge=0)
    lock_timeout: float = Field(900.0, gt=0)
    # retry settings
    max_retries: int = Field(3, ge=0)
    retry_backoff: float = Field(1.0, ge=0)
    max_retry_delay: float = Field(60.0, ge=0)
    """No wait between retries is longer than this, whatever a provider's retry-after asks."""
    model_timeout: float = Field(300.0, gt=0)
    """The timeout of the providers' HTTP clients (for models named by a string): a call whose
    server stays silent that long fails as retryable; its partial text is kept if it ends the run."""
    # input and output caps
    max_message_bytes: int = Field(DEFAULT_MAX_MESSAGE_BYTES, gt=0)
    max_tool_result_chars: int = Field(8_000, gt=0)
    # behaviour
    parallel_tool_calls: bool = True
    repeat_limit: int = Field(3, ge=2)
    """The same tool with the same arguments this many times in a row counts as a runaway loop."""
    memory_results: int = Field(5, ge=0)
    """Dated notes (memory/*.md) most relevant to the message, injected into each run's prompt (0: none)."""
    wind_down: bool = True
    """At max_tool_iterations (and at a run limit), make one last call without tools for a final answer."""

    @model_validator(mode="after")
    def _lease_outlives_a_run(self) -> LoopConfig:
        if self.lock_timeout <= self.execution_timeout:
            raise ValueError(
                f"lock_timeout ({self.lock_timeout:g} s) must be longer than execution_timeout "
                f"({self.execution_timeout:g} s), or a live run's lock could be taken over"
            )
        return self

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(cls.model_fields)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The ``LOOPWRIGHT_*`` settings present in ``environ`` (raw strings, validated later)."""
        env = os.environ if environ is None else environ
        found: dict[str, str] = {}
        for name in cls.model_fields:
            value = env.get(ENV_PREFIX + name.upper())
            if value is not None and value != "":
                found[name] = value
        return found

    @classmethod
    def resolve(
        cls,
        *,
        overrides: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        frontmatter: Mapping[str, Any] | None = None,
    ) -> LoopConfig:
        """Merge the four sources by precedence: overrides > environment > frontmatter > defaults."""
        merged: dict[str, Any] = {}
        for source in (frontmatter or {}, cls.from_env(environ), overrides or {}):
            for key, value in source.items():
                if value is None:
                    continue
                merged[_canonical(key)] = value
        try:
            return cls.model_validate(merged)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
            )
            raise ConfigError(f"invalid loop configuration: {problems}") from None


_CAMEL_TO_FIELD = {to_camel(name): name for name in LoopConfig.model_fields}


def _canonical(key: str) -> str:
    return _CAMEL_TO_FIELD.get(key, key)
