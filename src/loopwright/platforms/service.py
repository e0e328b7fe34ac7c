"""The platform service: one incoming chat message in, one reply out.

:meth:`PlatformService.handle` follows the specification's steps:

1. resolve the user (a guest is created on first contact);
2. check the budget — none left: the budget reply, no model call;
3. resolve the persona (server → platform → default);
4. resolve the conversation (platform, channel, thread) — its id is the session id;
5. choose the tools: the caller's permission level and the persona's modules;
6. register the attachments as file records and describe them in the message;
7–8. run the agent on the conversation's session (context, model calls, tools), every model call
   reserving budget first and charged after (:mod:`loopwright.platforms.budgets`);
9. save the run's messages, record the files tools produced, and reply.

One :class:`~loopwright.Agent` is built per persona and kept (rebuilt when the persona is edited):
its model, system prompt and output limit are the persona's. Each run gets a
:class:`~loopwright.Caller` (user, level, platform, server, channel, thread, conversation, and the
persona's modules as ``tool_groups``): the loop offers only the tools that caller may see, and tools
that declare a ``Caller`` parameter receive it. All agents share the SQL session store, so a
conversation's history is the same whichever persona answers it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from loopwright.agent import Agent
from loopwright.caller import Caller
from loopwright.config import LoopConfig
from loopwright.guardrails import Guardrail
from loopwright.limits import RunLimits
from loopwright.loop._intake import validate_message
from loopwright.messages import AssistantMessage, ToolResultMessage, UserMessage
from loopwright.models._registry import resolve_chain
from loopwright.models.base import Model, ModelSettings
from loopwright.models.pricing import PriceTable
from loopwright.platforms._metered import (
    CURRENT_METER,
    DEFAULT_OUTPUT_RESERVE,
    MeteredModel,
    RunMeter,
    reserve_before_call,
)
from loopwright.platforms.budgets import Budgets, Clock
from loopwright.platforms.conversations import ConversationInfo, resolve_conversation
from loopwright.platforms.files import FileAccess, describe_files, produced_files, read_file_tool
from loopwright.platforms.incoming import IncomingMessage, PlatformResponse, ResponseReason, parse_incoming
from loopwright.platforms.personas import PersonaInfo, resolve_persona
from loopwright.platforms.users import DEFAULT_GUEST_BUDGET, UserInfo, resolve_user
from loopwright.report import RunReport
from loopwright.sessions.sql import SQLSessionStore
from loopwright.sql._database import Database
from loopwright.sql.models import MessageRow
from loopwright.tools._function import tool as make_tool
from loopwright.tools.base import Tool

__all__ = ["FAILURE_REPLY", "PlatformService"]

log = logging.getLogger("loopwright.platforms")

FAILURE_REPLY = "I ran into a problem and could not answer. Please try again."

_AgentKey = tuple[str | None, datetime | None]


class PlatformService:
    """Serves chat-platform messages from a database of users, personas and conversations.

    ``model``, ``system`` and ``tools`` apply where no persona says otherwise. Give tools a ``level``
    and ``groups`` (``@tool(level="guest", groups=("search",))``): a caller sees a tool from its
    level up, and a persona's ``allowed_modules`` are groups. The built-in ``read_file`` tool
    (group ``files``, level ``guest``) reads attachments. ``files_dir`` keeps attachments sent inline.
    ``default_modules`` are the tool groups on offer when no persona applies (``None``: all).
    """

    def __init__(
        self,
        database: Database,
        *,
        model: Model | str | Sequence[Model | str] = "test",
        system: str = "",
        tools: Sequence[Tool | Callable[..., Any]] = (),
        config: LoopConfig | Mapping[str, Any] | None = None,
        prices: PriceTable | Mapping[str, Any] | None = None,
        files_dir: str | Path | None = None,
        guest_budget: int | None = DEFAULT_GUEST_BUDGET,
        default_modules: Sequence[str] | None = None,
        output_reserve: int = DEFAULT_OUTPUT_RESERVE,
        limits: RunLimits | None = None,
        guardrails: Sequence[Guardrail] = (),
        base_url: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.database = database
        self.store = SQLSessionStore(database)
        self.budgets = Budgets(database, clock=clock)
        self.files = FileAccess(database, Path(files_dir) if files_dir is not None else None)
        self.system = system
        self.config = config if isinstance(config, LoopConfig) else LoopConfig.resolve(overrides=config)
        if prices is None:
            self.prices = PriceTable.default()
        elif isinstance(prices, PriceTable):
            self.prices = prices
        else:
            self.prices = PriceTable.default().with_overrides(prices)
        self.guest_budget = guest_budget
        self.default_modules = None if default_modules is None else tuple(default_modules)
        self.output_reserve = output_reserve
        self._model = model
        self._base_url = base_url
        self._limits = limits
        self._guardrails = tuple(guardrails)
        self._clock = clock
        given = [t if isinstance(t, Tool) else make_tool(t) for t in tools]
        if not any(t.name == "read_file" for t in given):
            given.append(read_file_tool(self.files))
        self.tools: tuple[Tool, ...] = tuple(given)
        self._agents: dict[_AgentKey, Agent] = {}

    @classmethod
    def from_agent(cls, database: Database, agent: Agent, **kwargs: Any) -> PlatformService:
        """A service answering with ``agent``'s model, prompt, tools, loop settings and prices (a
        workspace agent keeps inline attachments in ``<workspace>/files``); ``kwargs`` override."""
        settings: dict[str, Any] = {
            "model": list(agent.models),
            "system": agent.system,
            "tools": list(agent.tools.values()),
            "config": agent.config,
            "prices": agent.prices,
            "limits": agent.limits,
        }
        if agent.workspace is not None:
            settings["files_dir"] = agent.workspace.root / "files"
        settings.update(kwargs)
        return cls(database, **settings)

    async def handle(self, message: IncomingMessage | dict[str, Any]) -> PlatformResponse:
        """Answer one message. Raises :class:`~loopwright.errors.InputError` for an invalid message
        (before anything is written); everything after that ends in a reply."""
        incoming = parse_incoming(message)
        if not incoming.attachments:  # refused before a user or a conversation is created
            validate_message(incoming.content, self.config.max_message_bytes)
        user = await resolve_user(
            self.database,
            incoming.platform,
            incoming.platform_user_id,
            platform_username=incoming.platform_username,
            guest_budget=self.guest_budget,
            clock=self._clock,
        )
        status = await self.budgets.status(user.id)
        if status.exceeded:
            return PlatformResponse(content=status.message(), reason="budget", user_id=user.id)
        persona = await resolve_persona(self.database, incoming.platform, incoming.platform_server_id)
        conversation = await resolve_conversation(
            self.database,
            user_id=user.id,
            persona_id=persona.id if persona else None,
            platform=incoming.platform,
            channel_id=incoming.platform_channel_id,
            thread_id=incoming.platform_thread_id,
            server_id=incoming.platform_server_id,
            clock=self._clock,
        )
        files = await self.files.register_attachments(
            incoming.attachments, user_id=user.id, conversation_id=conversation.id
        )
        text = incoming.content + describe_files(files)
        agent = self.agent_for(persona)
        modules = persona.allowed_modules if persona else self.default_modules
        caller = Caller(
            user_id=user.id,
            level=user.permission_level,
            platform=incoming.platform,
            server_id=incoming.platform_server_id,
            channel_id=incoming.platform_channel_id,
            thread_id=incoming.platform_thread_id,
            conversation_id=conversation.id,
            tool_groups=None if modules is None else frozenset(modules),
            extra={"persona": persona.name} if persona else {},
        )
        meter = RunMeter(
            budgets=self.budgets,
            prices=self.prices,
            user_id=user.id,
            conversation_id=conversation.id,
            output_reserve=self.output_reserve,
        )
        token = CURRENT_METER.set(meter)
        try:
            report = await agent.run(
                text, session_id=conversation.id, caller=caller, meta={"platform": _meta(incoming, user)}
            )
        finally:
            CURRENT_METER.reset(token)
            await meter.release()
        return await self._reply(report, meter, user, persona, conversation)

    async def _reply(
        self,
        report: RunReport,
        meter: RunMeter,
        user: UserInfo,
        persona: PersonaInfo | None,
        conversation: ConversationInfo,
    ) -> PlatformResponse:
        results = await self._save_messages(report, user, conversation)
        files = await self.files.record_produced(
            produced_files(results), user_id=user.id, conversation_id=conversation.id
        )
        content, error = report.final_text, report.error
        reason: ResponseReason = report.reason
        if meter.refused:  # the hook's StopRun made the budget message the run's answer
            content = content or (await self.budgets.status(user.id)).message()
            reason, error = "budget", None
        elif error is not None and not content:
            content = FAILURE_REPLY
        return PlatformResponse(
            content=content,
            files=tuple(files),
            reason=reason,
            user_id=user.id,
            conversation_id=conversation.id,
            run_id=report.id,
            persona=persona.name if persona else None,
            usage=meter.usage,
            cost_usd=meter.cost_usd,
            error=error,
        )

    async def _save_messages(
        self, report: RunReport, user: UserInfo, conversation: ConversationInfo
    ) -> list[ToolResultMessage]:
        """The run's transcript entries as conversation messages (user, assistant, tool_call,
        tool_result); returns its tool results."""
        entries = await self.store.load_run(conversation.id, report.id)
        rows: list[MessageRow] = []
        results: list[ToolResultMessage] = []
        for entry in entries:
            if type(entry) is UserMessage:
                rows.append(_row(conversation, "user", entry.content, report, user_id=user.id))
            elif type(entry) is AssistantMessage:
                if entry.content:
                    tokens = entry.usage.output_tokens if entry.usage else None
                    rows.append(_row(conversation, "assistant", entry.content, report, tokens, entry.model))
                for call in entry.tool_calls:
                    rows.append(
                        _row(
                            conversation,
                            "tool_call",
                            _json({"name": call.name, "arguments": call.arguments, "tool_use_id": call.id}),
                            report,
                        )
                    )
            elif type(entry) is ToolResultMessage:
                results.append(entry)
                body = {
                    "name": entry.name,
                    "result": None if entry.is_error else entry.content,
                    "error": entry.content if entry.is_error else None,
                    "tool_use_id": entry.tool_call_id,
                }
                rows.append(_row(conversation, "tool_result", _json(body), report))
        if rows:
            async with self.database.transaction() as s:
                s.add_all(rows)
        return results

    def agent_for(self, persona: PersonaInfo | None) -> Agent:
        """The agent serving ``persona`` (built once, rebuilt after the persona is edited)."""
        key: _AgentKey = (persona.id, persona.updated_at) if persona else (None, None)
        agent = self._agents.get(key)
        if agent is None:
            agent = self._agents[key] = self._build_agent(persona)
        return agent

    def _build_agent(self, persona: PersonaInfo | None) -> Agent:
        spec = persona.default_model if persona and persona.default_model else self._model
        models = resolve_chain(spec, base_url=self._base_url, timeout=self.config.model_timeout)
        settings = ModelSettings(
            max_tokens=persona.max_tokens_per_request if persona else None,
            parallel_tool_calls=self.config.parallel_tool_calls if self.tools else None,
        )
        system = persona.system_prompt if persona and persona.system_prompt else self.system
        agent = Agent(
            [MeteredModel(m) for m in models],
            name=f"persona:{persona.name}" if persona else "platform",
            system=system,
            tools=self.tools,
            config=self.config,
            settings=settings,
            store=self.store,
            prices=self.prices,
            limits=self._limits,
            guardrails=self._guardrails,
        )
        agent.hooks.on("before_model_call", reserve_before_call)
        return agent

    async def aclose(self) -> None:
        """Close the agents' model connections (the database stays open: it is the caller's)."""
        agents, self._agents = list(self._agents.values()), {}
        for agent in agents:
            await agent.aclose()

    async def __aenter__(self) -> PlatformService:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _meta(incoming: IncomingMessage, user: UserInfo) -> dict[str, Any]:
    meta = {
        "platform": incoming.platform,
        "user_id": user.id,
        "platform_user_id": incoming.platform_user_id,
        "server_id": incoming.platform_server_id,
        "channel_id": incoming.platform_channel_id,
        "thread_id": incoming.platform_thread_id,
    }
    return {k: v for k, v in meta.items() if v is not None}


def _row(
    conversation: ConversationInfo,
    role: str,
    content: str,
    report: RunReport,
    token_count: int | None = None,
    model: str | None = None,
    *,
    user_id: str | None = None,
) -> MessageRow:
    return MessageRow(
        conversation_id=conversation.id,
        user_id=user_id,
        role=role,
        content=content,
        run_id=report.id,
        token_count=token_count,
        model_used=model,
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
