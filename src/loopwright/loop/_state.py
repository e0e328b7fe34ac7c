"""The state of one run, passed from stage to stage."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopwright.approvals import ApprovalBoard, ApprovalDecision, Approver
from loopwright.caller import Caller, tool_visible
from loopwright.config import LoopConfig
from loopwright.context.accounting import HybridEstimate, counter_for
from loopwright.context.pruning import PruneCache, prune_tool_results
from loopwright.context.registry import ContextRegistry
from loopwright.guardrails import Guardrail
from loopwright.hooks._bus import HookBus
from loopwright.lanes.base import LockLease, SessionLocks
from loopwright.lanes.capacity import RunSlots
from loopwright.limits import RunLimits
from loopwright.loop._sink import EventSink
from loopwright.messages import Message, ToolCall
from loopwright.models._accumulate import StepAccumulator
from loopwright.models.base import Model, ModelSettings, ToolDefinition
from loopwright.models.pricing import Price, PriceTable
from loopwright.permissions import PermissionPolicy, PolicyDecision
from loopwright.report import RunReport, StepReport
from loopwright.sessions.base import SessionInfo, SessionStore, new_session_id
from loopwright.tools.base import Tool, ToolTraits

__all__ = ["RunRequest", "RunSetup", "RunState"]


@dataclass(slots=True)
class _SetupCache:
    """What a :class:`RunSetup` works out once and keeps."""

    stable_version: int = -1
    stable_prompt: str = ""
    tool_chars: int = -1
    views: dict[tuple[str, ...], tuple[int, str]] = field(default_factory=dict)
    """Stable prompts of callers who see fewer tools, by the names they see: (version, prompt)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSetup:
    """Everything about the agent a run needs; built once by :class:`~loopwright.Agent`."""

    agent_name: str
    models: tuple[Model, ...]
    """The model, then its fallbacks, in order."""
    tools: Mapping[str, Tool]
    tool_defs: tuple[ToolDefinition, ...]
    config: LoopConfig
    store: SessionStore
    locks: SessionLocks
    identity: str
    context: ContextRegistry
    """The agent's prompt layers; its stable ones are the prefix of every run's system prompt."""
    workspace: Path | None = None
    memory_path: Path | None = None
    settings: ModelSettings = ModelSettings()
    limits: RunLimits | None = None
    guardrails: tuple[Guardrail, ...] = ()
    slots: RunSlots | None = None
    """The global lane (``max_concurrent_runs``), when capped."""
    prices: PriceTable = field(default_factory=PriceTable.default)
    hooks: HookBus = field(default_factory=HookBus)
    policy: PermissionPolicy = field(default_factory=PermissionPolicy)
    traits: Mapping[str, ToolTraits] = field(default_factory=dict)
    decisions: Mapping[str, PolicyDecision] = field(default_factory=dict)
    """The policy's decision for each tool, worked out once."""
    approvals: ApprovalBoard = field(default_factory=ApprovalBoard)
    approver: Approver | None = None
    journal: bool = True
    """Journal each tool call before it runs: for stores that survive a crash (``store.durable``)."""
    _prices_seen: dict[str, Price | None] = field(default_factory=dict)

    _cache: _SetupCache = field(default_factory=lambda: _SetupCache())

    @property
    def model(self) -> Model:
        return self.models[0]

    @property
    def tool_chars(self) -> int:
        """Characters of the tool definitions as sent (names, descriptions, schemas): a bound on
        their tokens. An agent's tools never change once it is built, so this is counted once."""
        cache = self._cache
        if cache.tool_chars < 0:
            cache.tool_chars = sum(
                len(t.name) + len(t.description) + len(repr(t.parameters)) for t in self.tool_defs
            )
        return cache.tool_chars

    @property
    def stable_prompt(self) -> str:
        """The stable layers composed (recomposed only when a layer changed)."""
        cache = self._cache
        version = self.context.version
        if cache.stable_version != version:
            cache.stable_prompt = self.context.flat(stable=True)
            cache.stable_version = version
        return cache.stable_prompt

    def stable_prompt_for(self, tool_defs: tuple[ToolDefinition, ...]) -> str:
        """The stable prefix listing only ``tool_defs`` (a caller who sees fewer tools)."""
        from loopwright.context.prompt import tools_layer

        names = tuple(t.name for t in tool_defs)
        version = self.context.version
        cached = self._cache.views.get(names)
        if cached is not None and cached[0] == version:
            return cached[1]
        view = self.context.fork()
        layer = tools_layer(tool_defs)
        if layer is None:
            view.remove("tools")
        else:
            view.set(layer)
        prompt = view.flat(stable=True)
        self._cache.views[names] = (version, prompt)
        return prompt

    def price_for(self, model_name: str) -> Price | None:
        """The model's price (looked up once per model name)."""
        try:
            return self._prices_seen[model_name]
        except KeyError:
            price = self._prices_seen[model_name] = self.prices.price_for(model_name)
            return price


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest:
    message: str
    session_id: str | None = None
    deps: Any = None
    meta: dict[str, Any] | None = None
    limits: RunLimits | None = None
    """Overrides the agent's limits for this run."""
    wait: float | None = None
    """Seconds to wait for a busy session (``None``: the configured ``queue_timeout``)."""
    caller: Caller | None = None
    approver: Approver | None = None
    resume: ResumePoint | None = None
    """Set when this run continues a checkpointed run (``Agent.resume_with_approval``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumePoint:
    """Where a checkpointed run stopped: its id, the step whose calls wait, its report so far."""

    run_id: str
    step: int
    report: dict[str, Any]
    decisions: dict[str, tuple[ApprovalDecision, str, str]]
    """Call id -> (decision, who gave it, digest of the tool and arguments it was given for)."""


@dataclass(slots=True, kw_only=True)
class RunState:
    setup: RunSetup
    request: RunRequest
    sink: EventSink
    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    started: float = field(default_factory=time.perf_counter)
    report: RunReport = field(init=False)
    session: SessionInfo | None = None
    lease: LockLease | None = None
    system: str = ""
    messages: list[Message] = field(default_factory=list)
    appended: int = 0
    """Transcript entries this run has written."""
    open_calls: dict[str, ToolCall] = field(default_factory=dict)
    """Tool calls of the current step that have no result yet."""
    current: StepAccumulator | None = None
    """The model step being streamed, for keeping partial text if the run is cut short."""
    current_started: float = 0.0
    stop_requested: bool = False
    has_slot: bool = False
    executing: bool = False
    """In EXECUTE: an abort cancels the work at once (before, it waits for the message to be saved)."""
    aborted: bool = False
    """Interrupted by a newer message: the work task was cancelled, the run ends ``stopped``."""
    task: asyncio.Task[Any] | None = None
    """The task running CONTEXT and EXECUTE (what an interrupt cancels)."""
    steering: list[str] = field(default_factory=list)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the run has ended (report saved, lock released)."""
    """Messages to inject before the next model call (``steer`` mode)."""
    summary: str = ""
    """The summary of compacted messages in force (part of the system prompt)."""
    memory_text: str = ""
    stable_prompt: str = ""
    """The agent's stable prefix for this run (composed once per run)."""
    recalled: str = ""
    """Dated notes relevant to this run's message (``## Relevant memory``)."""
    estimate: HybridEstimate = field(init=False)
    """Tokens of the context: anchored to the provider's last reported count, plus new messages."""
    prune_cache: PruneCache = field(default_factory=PruneCache)
    pruning: bool = False
    """Old large tool results are being pruned from what is sent (the context passed half the window)."""
    flushed: bool = False
    """A memory flush happened in this compaction cycle."""
    compactions: int = 0
    repeat_key: tuple[str, str] | None = None
    repeat_count: int = 0
    repeat_offences: int = 0
    warnings: list[str] = field(default_factory=list)
    prefed: dict[str, tuple[ApprovalDecision, str, str]] = field(default_factory=dict)
    """Decisions given before the run reached the call (a resumed run's), used once."""
    in_doubt: set[str] = field(default_factory=set)
    started_calls: set[str] = field(default_factory=set)
    """Calls of this run that began executing (a call cut off among them is in doubt, not unrun)."""
    """Calls a crash left started but unfinished (journaled as started, no result)."""
    stop_run: BaseException | None = None
    """A hook's StopRun raised inside concurrent tool calls, re-raised after them."""

    session_id: str = field(init=False)
    """The request's session, or a new one."""
    tools: Mapping[str, Tool] = field(init=False)
    """The tools this run's caller may see and call."""
    tool_defs: tuple[ToolDefinition, ...] = field(init=False)

    def __post_init__(self) -> None:
        request = self.request
        self.session_id = request.session_id or new_session_id()
        self.estimate = HybridEstimate(counter_for(self.setup.model.name))
        setup = self.setup
        caller = request.caller
        if caller is None or (caller.level == "owner" and caller.tool_groups is None):
            self.tools, self.tool_defs = setup.tools, setup.tool_defs
        else:
            self.tools = {n: t for n, t in setup.tools.items() if tool_visible(t, caller)}
            self.tool_defs = tuple(d for d in setup.tool_defs if d.name in self.tools)
        if request.resume is not None:
            self.run_id = request.resume.run_id
            self.report = RunReport.from_dict(request.resume.report)
            self.prefed = dict(request.resume.decisions)
            return
        self.report = RunReport(
            id=self.run_id,
            session_id=self.session_id,
            model=setup.model.name,
            started_at=time.time(),
            user_message=request.message,
        )

    @property
    def caller(self) -> Caller | None:
        return self.request.caller

    @property
    def config(self) -> LoopConfig:
        return self.setup.config

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000.0

    def view(self) -> list[Message]:
        """The messages a model is sent: the context, with old large tool results pruned once the
        context fills half the usable window (below that, pruning would save nothing that matters)."""
        if not self.pruning:
            return self.messages
        return prune_tool_results(self.messages, cache=self.prune_cache)[0]

    def abort(self) -> None:
        """Stop the run now: the step in flight is cut short, completed tool calls are kept. A run
        still in CONTEXT first records its user message (it was accepted), then stops."""
        if self.aborted:
            return
        self.aborted = True
        if self.executing and self.task is not None and not self.task.done():
            self.task.cancel()

    def add_step(self, step: StepReport) -> None:
        self.report.steps.append(step)
