"""The memory tools in a real agent run, through the built-in registry, and memory_context."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from loopwright import Agent
from loopwright.memory import memory_context, memory_search_tool, memory_tools, memory_write_tool
from loopwright.messages import ToolResultMessage
from loopwright.testing import ScriptedModel, TestModel
from loopwright.tools import BUILTIN_TOOL_NAMES, FunctionTool, ToolContext, builtin_tool
from loopwright.workspace import AgentDefinition, Workspace
from tests.memory.helpers import clock, write

AGENT_MD = "---\nname: rememberer\nmodel: test\ntools: [memory_write, memory_search]\n---\nYou remember.\n"


def ctx() -> ToolContext:
    return ToolContext(run_id="r", session_id="s", call_id="c", tool_name="t", step=0)


async def call(tool: FunctionTool[..., Any], arguments: str) -> Any:
    return await tool.call(tool.validate(arguments), ctx())


def results(model: ScriptedModel) -> list[tuple[str, bool]]:
    last = model.requests[-1].messages
    return [(m.content, m.is_error) for m in last if isinstance(m, ToolResultMessage)]


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if ".loopwright" not in p.parts)


# --- registry ------------------------------------------------------------------------------------


def test_memory_tools_are_built_ins(root: Path) -> None:
    assert BUILTIN_TOOL_NAMES[-2:] == ("memory_write", "memory_search")
    write_tool = builtin_tool("memory_write", root)
    search_tool = builtin_tool("memory_search", root)
    assert (write_tool.name, search_tool.name) == ("memory_write", "memory_search")
    assert isinstance(write_tool, FunctionTool) and not write_tool.idempotent and not write_tool.inline
    assert isinstance(search_tool, FunctionTool) and search_tool.idempotent and not search_tool.inline
    assert [t.name for t in memory_tools(root)] == ["memory_write", "memory_search"]
    tools = Workspace(root).resolve_tools(AgentDefinition(name="t", tools=["memory_search", "memory_write"]))
    assert [t.name for t in tools] == ["memory_search", "memory_write"]


def test_schemas_are_described_for_the_model(root: Path) -> None:
    schema = memory_write_tool(root).parameters
    assert schema["required"] == ["text"]
    assert schema["properties"]["where"] == {
        "default": "daily",
        "description": 'Where to write: "daily" for today\'s log, "memory" for MEMORY.md.',
        "enum": ["daily", "memory"],
        "type": "string",
    }
    assert all(p.get("description") for p in schema["properties"].values())
    search = memory_search_tool(root)
    assert search.description.startswith("Search your memory (MEMORY.md and the daily notes")
    assert search.parameters["properties"]["k"]["maximum"] == 20


# --- in an agent run -----------------------------------------------------------------------------


async def test_an_agent_writes_then_finds_a_memory(root: Path) -> None:
    write(root, {"AGENT.md": AGENT_MD})
    model = TestModel(
        args={
            "memory_write": {
                "text": "- Ada takes her coffee black.",
                "where": "memory",
                "section": "Preferences",
            },
            "memory_search": {"query": "how does Ada take coffee?"},
        }
    )
    report = await Agent(model, workspace=root).run("Remember how I take my coffee.")
    assert report.reason == "done"
    assert (root / "MEMORY.md").read_text() == "# Memory\n\n## Preferences\n\n- Ada takes her coffee black.\n"
    assert "memory_write → added to section 'Preferences' of MEMORY.md" in report.final_text
    assert "memory_search → MEMORY.md:5: Ada takes her coffee black." in report.final_text


async def test_daily_notes_through_an_agent(root: Path) -> None:
    model = ScriptedModel(
        [
            [ScriptedModel.call("memory_write", text="Shipped the beta.")],
            [ScriptedModel.call("memory_search", query="beta shipped", k=3)],
            "Noted.",
        ]
    )
    await Agent(model, tools=memory_tools(root, clock=clock)).run("Log it.")
    assert results(model) == [
        ("saved to memory/2024-05-01.md", False),
        ("memory/2024-05-01.md:3 (2024-05-01): 09:30 Shipped the beta.", False),
    ]
    assert (root / "memory" / "2024-05-01.md").read_text() == "# 2024-05-01\n\n- 09:30 Shipped the beta.\n"


async def test_sections_are_added_to_and_replaced(root: Path) -> None:
    write_tool = memory_write_tool(root)
    assert await call(write_tool, '{"text": "Oslo", "where": "memory", "section": "Location"}') == (
        "added to section 'Location' of MEMORY.md"
    )
    replace = '{"text": "Bergen", "where": "memory", "section": "location", "replace": true}'
    assert await call(write_tool, replace) == "replaced section 'location' of MEMORY.md"
    assert await call(write_tool, '{"text": "Plain fact.", "where": "memory"}') == "added to MEMORY.md"
    assert (root / "MEMORY.md").read_text() == "# Memory\n\n## Location\n\nBergen\n\nPlain fact.\n"
    search = memory_search_tool(root)
    assert await call(search, '{"query": "Oslo"}') == "no memory matches for 'Oslo'"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"text": "x", "section": "Work"}, 'section and replace apply to where="memory" only'),
        ({"text": "x", "where": "memory", "replace": True}, "replace=true needs the section to replace"),
        ({"text": "x", "where": "memory", "section": "a\nb"}, "must be one line"),
    ],
)
async def test_misused_arguments_are_errors_the_model_sees(
    root: Path, arguments: dict[str, Any], message: str
) -> None:
    model = ScriptedModel([[ScriptedModel.call("memory_write", **arguments)], "ok"])
    await Agent(model, tools=memory_tools(root)).run("go")
    [(text, is_error)] = results(model)
    assert is_error and message in text
    assert files_under(root) == []


# --- confinement through the tools ---------------------------------------------------------------

HOSTILE_CALLS = [
    {"text": "x", "where": "../../outside"},
    {"text": "x", "where": "/etc"},
    {"text": "x", "path": "../outside/secret.md"},
    {"text": "x", "file": "/etc/passwd"},
    {"text": "", "where": "daily"},
]


@pytest.mark.parametrize("arguments", HOSTILE_CALLS)
async def test_arguments_cannot_name_a_file(root: Path, outside: Path, arguments: dict[str, Any]) -> None:
    model = ScriptedModel([[ScriptedModel.call("memory_write", **arguments)], "ok"])
    await Agent(model, tools=memory_tools(root)).run("go")
    [(text, is_error)] = results(model)
    assert is_error and text.startswith("invalid arguments for tool 'memory_write'")
    assert files_under(root) == [] and files_under(outside) == ["secret.md"]


async def test_path_like_sections_are_only_headings(root: Path, outside: Path) -> None:
    write_tool = memory_write_tool(root)
    for section in ["../../outside/secret.md", "/etc/passwd", "memory/../AGENT.md"]:
        await call(write_tool, f'{{"text": "x", "where": "memory", "section": "{section}"}}')
    assert files_under(root) == ["MEMORY.md"]
    assert "## ../../outside/secret.md\n" in (root / "MEMORY.md").read_text()
    assert files_under(outside) == ["secret.md"]
    assert (outside / "secret.md").read_text() == "do not touch\n"


async def test_a_memory_folder_symlinked_out_is_a_scope_error(root: Path, outside: Path) -> None:
    (root / "memory").symlink_to(outside, target_is_directory=True)
    model = ScriptedModel([[ScriptedModel.call("memory_write", text="escape")], "ok"])
    await Agent(model, tools=memory_tools(root)).run("go")
    [(text, is_error)] = results(model)
    assert is_error and text.startswith("scope error: ")
    assert sorted(os.listdir(outside)) == ["secret.md"]


async def test_memory_md_symlinked_out_is_a_scope_error(root: Path, outside: Path) -> None:
    (root / "MEMORY.md").symlink_to(outside / "secret.md")
    model = ScriptedModel([[ScriptedModel.call("memory_write", text="x", where="memory")], "ok"])
    await Agent(model, tools=memory_tools(root)).run("go")
    [(text, is_error)] = results(model)
    assert is_error and "scope error: " in text
    assert (outside / "secret.md").read_text() == "do not touch\n"


# --- memory_context ------------------------------------------------------------------------------


async def test_memory_context_lists_the_best_hits(root: Path) -> None:
    write(
        root,
        {
            "MEMORY.md": "# Memory\n\n- Staging runs on Postgres 16.\n",
            "memory/2024-04-30.md": "# 2024-04-30\n\n- 09:15 Deployed v2 to staging.\n- 11:00 Lunch.\n",
        },
    )
    assert await memory_context(root, "What did we deploy to staging?") == (
        "## Relevant memory\n"
        "- memory/2024-04-30.md:3 (2024-04-30): 09:15 Deployed v2 to staging.\n"
        "- MEMORY.md:3: Staging runs on Postgres 16."
    )
    assert await memory_context(root, "Postgres on staging?", k=1, source="daily") == (
        "## Relevant memory\n- memory/2024-04-30.md:3 (2024-04-30): 09:15 Deployed v2 to staging."
    )
    assert await memory_context(root, "zeppelins?") == ""


async def test_memory_context_keeps_to_its_budget(root: Path) -> None:
    write(root, {"memory/2024-01-01.md": "".join(f"- 09:00 alpha note {i} {'x' * 200}\n" for i in range(10))})
    block = await memory_context(root, "alpha", k=10, max_chars=700)
    assert block.startswith("## Relevant memory\n- memory/2024-01-01.md:")
    assert len(block) <= 700
    assert block.count("\n- ") == 2  # a third hit would not fit


async def test_memory_context_without_memory_touches_nothing(root: Path) -> None:
    assert await memory_context(root, "anything") == ""
    assert os.listdir(root) == []


async def test_memory_context_never_raises_for_a_broken_index(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(root, {"MEMORY.md": "staging facts\n", ".loopwright": "a file where the state folder should be"})
    assert await memory_context(root, "staging") == ""
    assert "memory search failed, continuing without relevant memory" in caplog.text
