"""Tools by permission level and persona modules; the caller's context for tools that declare it."""

from __future__ import annotations

from loopwright import tool
from loopwright.caller import Caller
from loopwright.platforms import PlatformService, create_persona, resolve_user, set_permission
from loopwright.sql import Database
from loopwright.testing import ScriptedModel
from tests.platforms.helpers import message

seen: list[Caller | None] = []


@tool(level="guest", groups=("chat",))
def weather(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


@tool(level="user", groups=("notes",))
def save_note(text: str) -> str:
    """Save a note."""
    return "saved"


@tool(level="admin", groups=("admin",))
def ban(member: str) -> str:
    """Ban a member."""
    return f"banned {member}"


@tool(level="owner", groups=("admin",))
def shutdown() -> str:
    """Shut the bot down."""
    return "bye"


@tool(level="guest", groups=("chat",))
def remind(text: str, caller: Caller) -> str:
    """Set a reminder in this channel."""
    seen.append(caller)
    return f"reminder set for {caller.user_id} in {caller.platform}/{caller.channel_id}/{caller.thread_id}"


TOOLS = [weather, save_note, ban, shutdown, remind]


def _offered(model: ScriptedModel, index: int) -> list[str]:
    return sorted(t.name for t in model.requests[index].tools)


async def test_each_level_sees_the_tools_at_or_below_it(database: Database) -> None:
    model = ScriptedModel(["g", "u", "a", "o"])
    service = PlatformService(database, model=model, tools=TOOLS)
    for i, level in enumerate(["guest", "user", "admin", "owner"]):
        user = await resolve_user(database, "discord", level)
        await set_permission(database, user.id, level)
        await service.handle(message(platform_user_id=level, platform_channel_id=f"c-{level}"))
        assert model.requests[i].tools, level
    assert _offered(model, 0) == ["read_file", "remind", "weather"]
    assert _offered(model, 1) == ["read_file", "remind", "save_note", "weather"]
    assert _offered(model, 2) == ["ban", "read_file", "remind", "save_note", "weather"]
    assert _offered(model, 3) == ["ban", "read_file", "remind", "save_note", "shutdown", "weather"]


async def test_a_persona_offers_only_its_modules(database: Database) -> None:
    await create_persona(database, "admins-room", platform="discord", allowed_modules=["admin", "chat"])
    owner = await resolve_user(database, "discord", "boss")
    await set_permission(database, owner.id, "owner")
    model = ScriptedModel(["ok", "ok"])
    service = PlatformService(database, model=model, tools=TOOLS)
    await service.handle(message(platform_user_id="boss"))
    assert _offered(model, 0) == ["ban", "remind", "shutdown", "weather"]  # no notes, no files
    await service.handle(message(platform_user_id="newcomer", platform_channel_id="c2"))
    assert _offered(model, 1) == ["remind", "weather"]  # a guest: admin tools stay hidden


async def test_a_hidden_tool_cannot_be_called(database: Database) -> None:
    model = ScriptedModel([[ScriptedModel.call("ban", member="bob")], "I could not."])
    service = PlatformService(database, model=model, tools=TOOLS)
    reply = await service.handle(message("ban bob"))
    assert reply.content == "I could not."
    result = model.requests[1].messages[-1]
    assert result.role == "tool" and result.is_error and "unknown tool 'ban'" in result.content
    assert "banned" not in result.content


async def test_tools_that_declare_a_caller_get_the_platform_context(database: Database) -> None:
    seen.clear()
    model = ScriptedModel([[ScriptedModel.call("remind", text="water the plants")], "Done."])
    service = PlatformService(database, model=model, tools=TOOLS)
    reply = await service.handle(
        message("remind me", platform_server_id="g1", platform_channel_id="c9", platform_thread_id="t3")
    )
    assert len(seen) == 1 and seen[0] is not None
    caller = seen[0]
    assert (caller.user_id, caller.level, caller.platform) == (reply.user_id, "guest", "discord")
    assert (caller.server_id, caller.channel_id, caller.thread_id) == ("g1", "c9", "t3")
    assert caller.conversation_id == reply.conversation_id
    assert "user_id" not in model.requests[0].tools[0].parameters.get(
        "properties", {}
    )  # never the model's to set
    assert f"reminder set for {reply.user_id} in discord/c9/t3" in model.requests[1].messages[-1].content
