"""Personas: server → platform → default, each carrying its prompt, modules, model and max tokens."""

from __future__ import annotations

import pytest

from loopwright import tool
from loopwright.errors import InputError, NotFoundError
from loopwright.platforms import (
    PlatformService,
    create_persona,
    edit_persona,
    get_persona,
    list_personas,
    resolve_persona,
)
from loopwright.sql import Database
from loopwright.testing import ScriptedModel
from tests.platforms.helpers import message


@tool(level="guest", groups=("search",))
def search(query: str) -> str:
    """Search the web."""
    return f"results for {query}"


@tool(level="guest", groups=("math",))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def _personas(db: Database) -> None:
    await create_persona(db, "house", system_prompt="You are the house assistant.", is_default=True)
    await create_persona(
        db, "discordian", platform="discord", system_prompt="You speak Discord.", allowed_modules=["search"]
    )
    await create_persona(
        db,
        "guild-42",
        platform="discord",
        platform_server_id="42",
        system_prompt="You serve guild 42.",
        allowed_modules=["math"],
        max_tokens_per_request=321,
        default_model="test",
    )


async def test_the_most_specific_persona_wins(database: Database) -> None:
    assert await resolve_persona(database, "discord", "42") is None  # none yet: the service's settings
    await _personas(database)
    server = await resolve_persona(database, "discord", "42")
    platform = await resolve_persona(database, "discord", "7")
    no_server = await resolve_persona(database, "discord", None)
    default = await resolve_persona(database, "slack", "42")
    assert server is not None and server.name == "guild-42"
    assert platform is not None and platform.name == "discordian"
    assert no_server is not None and no_server.name == "discordian"
    assert default is not None and default.name == "house"


async def test_a_persona_sets_prompt_tools_model_and_max_tokens(database: Database) -> None:
    await _personas(database)
    model = ScriptedModel(["on discord", "in slack"])
    service = PlatformService(database, model=model, system="service prompt", tools=[search, add])
    on_discord = await service.handle(message(platform_server_id="7"))
    in_slack = await service.handle(message(platform="slack"))
    assert on_discord.persona == "discordian" and in_slack.persona == "house"
    discord_request, slack_request = model.requests
    assert "You speak Discord." in discord_request.system and "service prompt" not in discord_request.system
    assert [t.name for t in discord_request.tools] == ["search"]
    assert "You are the house assistant." in slack_request.system
    assert sorted(t.name for t in slack_request.tools) == ["add", "read_file", "search"]  # no modules: all
    assert discord_request.settings.max_tokens is None
    # the guild persona's own model ("test") answers, with its output limit
    guild = await service.handle(message("what is 2 + 2?", platform_server_id="42", platform_channel_id="g"))
    assert guild.persona == "guild-42"
    report = (await service.store.list_reports(guild.conversation_id or ""))[-1]
    assert report.model == "test" and report.steps[0].tool_calls[0].tool_name == "add"
    assert len(model.requests) == 2  # the scripted model was not asked
    assert service.agent_for(await get_persona(database, "guild-42")).settings.max_tokens == 321


async def test_editing_a_persona_takes_effect_on_the_next_message(database: Database) -> None:
    await _personas(database)
    model = ScriptedModel(["one", "two"])
    service = PlatformService(database, model=model)
    await service.handle(message(platform="slack"))
    edited = await edit_persona(
        database, "house", system_prompt="You are brand new.", max_tokens_per_request=50
    )
    assert edited.system_prompt == "You are brand new." and edited.is_default
    await service.handle(message(platform="slack"))
    assert "You are brand new." in model.requests[1].system
    assert model.requests[1].settings.max_tokens == 50
    cleared = await edit_persona(database, "house", max_tokens_per_request=None)
    assert cleared.max_tokens_per_request is None and cleared.system_prompt == "You are brand new."


async def test_one_persona_per_place_and_clear_errors(database: Database) -> None:
    await _personas(database)
    with pytest.raises(InputError, match="there is already a default persona"):
        await create_persona(database, "second-default", is_default=True)
    with pytest.raises(InputError, match="platform discord already has a persona"):
        await create_persona(database, "another", platform="discord")
    with pytest.raises(InputError, match="server discord:42 already has a persona"):
        await create_persona(database, "again", platform="discord", platform_server_id="42")
    with pytest.raises(InputError, match="needs its platform"):
        await create_persona(database, "lost", platform_server_id="9")
    with pytest.raises(InputError, match="the name 'house' is taken"):
        await create_persona(database, "house")
    with pytest.raises(InputError, match="invalid persona name"):
        await create_persona(database, "no spaces please")
    with pytest.raises(InputError, match="invalid tool module names: 'bad module'"):
        await create_persona(database, "mods", allowed_modules=["bad module"])
    with pytest.raises(NotFoundError, match="persona 'ghost' not found"):
        await edit_persona(database, "ghost", system_prompt="x")
    assert [p.name for p in await list_personas(database)] == ["discordian", "guild-42", "house"]


async def test_a_service_can_take_its_defaults_from_an_agent(database: Database, tmp_path: object) -> None:
    from loopwright import Agent

    model = ScriptedModel(["from the agent's model"])
    agent = Agent(model, system="Agent prompt.", tools=[search], config={"max_tool_iterations": 7})
    service = PlatformService.from_agent(database, agent)
    reply = await service.handle(message())
    assert reply.content == "from the agent's model"
    assert "Agent prompt." in model.requests[0].system
    assert sorted(t.name for t in model.requests[0].tools) == ["read_file", "search"]
    assert service.config.max_tool_iterations == 7
