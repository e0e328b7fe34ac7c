"""1,000 malformed argument payloads through the real loop: zero crashes, each an error result.

A model sends tool calls whose raw argument text is broken in every way we could think of (invalid
JSON, non-objects, wrong types, missing and unknown keys, huge strings, deep nesting, NaN/Infinity,
lone surrogates and other Unicode junk) to built-in file tools, a typed ``@tool`` function and the
tools of a real MCP server. The run must end normally, every call must get exactly one result, that
result must be an error the model can read (bounded in size), and the transcript on disk must load
back intact.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from tests.helpers import assert_paired
from tests.tools.mcp_fixtures.support import demo

from loopwright import Agent, ToolCall, tool
from loopwright.messages import Message, ToolResultMessage
from loopwright.testing import FunctionModel, ScriptedModel
from loopwright.testing._models import AgentInfo
from loopwright.tools.builtin import builtin_tool
from loopwright.tools.mcp import MCPToolset

PAYLOADS = 1000
BATCH = 125
MAX_ERROR_CHARS = 2000


@tool
def configure(
    name: str,
    count: int,
    ratio: float,
    tags: list[str],
    options: dict[str, int],
    mode: Literal["fast", "safe"] = "safe",
) -> str:
    """Configure something (a tool with many argument types)."""
    return f"configured {name}"


@dataclass(frozen=True)
class Target:
    tool: str
    valid: dict[str, Any]
    fields: dict[str, str]  # required field -> JSON type
    forbids_extra: bool = True


TARGETS = [
    Target("read_file", {"path": "notes.txt"}, {"path": "string"}),
    Target(
        "edit_file",
        {"path": "notes.txt", "old_text": "a", "new_text": "b"},
        {"path": "string", "old_text": "string", "new_text": "string"},
    ),
    Target("search_files", {"pattern": "a"}, {"pattern": "string"}),
    Target(
        "configure",
        {"name": "n", "count": 1, "ratio": 0.5, "tags": ["t"], "options": {"k": 1}},
        {"name": "string", "count": "integer", "tags": "array", "options": "object"},
    ),
    Target("demo__add", {"a": 1, "b": 2}, {"a": "integer", "b": "integer"}, forbids_extra=False),
    Target("demo__echo", {"text": "hi"}, {"text": "string"}, forbids_extra=False),
]

_WRONG: dict[str, list[Any]] = {
    "string": [5, -1.5, True, None, [], ["x"], {}, {"a": "b"}],
    "integer": ["seven", "", 1.5, True, None, [], {}, [1], {"n": 1}],
    "array": ["x", 5, True, None, {}, {"0": "x"}],
    "object": ["x", 5, True, None, [], [["k", 1]]],
}
_JUNK_TEXT = [
    "\u202e\u2066",
    "\u200b\ufeff",
    "💥" * 50,
    "\x00\x01\x1b[2J",
    "Z̸̢̛̤͎̈́a̷͙͐l̶͕̈g̵̣̋o̴̰͝",
    "\ufffd\uffff",
    "\\ud800",
    "'; DROP TABLE--",
    "${HOME}$(id)`id`",
]


def _invalid_json(rng: random.Random, valid: str, i: int) -> str:
    breakers: list[Callable[[str], str]] = [
        lambda s: s[:-1],  # unterminated
        lambda s: s[: max(1, len(s) // 2)],
        lambda s: s + ",",
        lambda s: s.replace('"', "'"),
        lambda s: s.replace('":', '"'),
        lambda s: "{" + s,
        lambda s: s + "}",
        lambda s: s.replace("{", "{/* c */", 1),
        lambda s: s.replace('"', "", 2),
        lambda s: "\ufeff" + s + "\x00garbage",
        lambda s: s.replace(",", ",,", 1) if "," in s else s + ",,",
        lambda s: s[:-1] + ', "x": }',
    ]
    fixed = [
        "{",
        "}",
        "[",
        "nul",
        "tru",
        "{'a': 1}",
        "None",
        "{a: 1}",
        '{"a" 1}',
        '{"a": 01}',
        '{"a": .5}',
        "\x00",
    ]
    if i % 3 == 0:
        return fixed[i // 3 % len(fixed)] + " " * (i % 5)
    return rng.choice(breakers)(valid) + " " * (i % 7)


def _non_object(rng: random.Random, i: int) -> str:
    values = [
        "1",
        "-0",
        "1e999",
        '"a string"',
        "[]",
        "[{}]",
        "null",
        "true",
        "false",
        '"{}"',
        "[1, 2, 3]",
        "3.14",
    ]
    return values[i % len(values)] + " " * rng.randrange(4)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def make_payload(i: int, rng: random.Random) -> tuple[Target, str, str]:
    """The ``i``-th payload: (target, raw argument text, kind of defect)."""
    target = TARGETS[i % len(TARGETS)]
    valid = dict(target.valid)
    kind = [
        "invalid_json",
        "non_object",
        "missing",
        "extra",
        "wrong_type",
        "nan",
        "deep",
        "huge",
        "unicode",
        "surrogate",
    ][(i // len(TARGETS)) % 10]
    field = rng.choice(sorted(target.fields))
    if kind == "extra" and not target.forbids_extra:
        kind = "wrong_type"  # an MCP input schema may allow extra keys; break a type instead
    if kind == "huge" and target.fields[field] != "string":
        kind = "wrong_type"
    if kind == "invalid_json":
        return target, _invalid_json(rng, json.dumps(valid), i), kind
    if kind == "non_object":
        return target, _non_object(rng, i), kind
    if kind == "missing":
        valid.pop(field)
        valid = {k: v for k, v in valid.items() if rng.random() < 0.7}
        return target, json.dumps(valid), kind
    if kind == "extra":
        valid[rng.choice(["evil", "__proto__", "constructor", "", " ", "path ", "PATH", f"k{i}"])] = i
        return target, json.dumps(valid), kind
    if kind == "wrong_type":
        valid[field] = rng.choice(_WRONG[target.fields[field]])
        valid["_n"] = i if target.forbids_extra else None  # also unique; an extra key where forbidden
        if not target.forbids_extra:
            del valid["_n"]
        return target, json.dumps(valid), kind
    if kind == "nan":
        text = json.dumps(valid)
        constant = rng.choice(["NaN", "Infinity", "-Infinity"])
        number_field = next((f for f, t in target.fields.items() if t == "integer"), None)
        if number_field is not None:  # a non-finite number where an integer belongs
            valid[number_field] = 0
            text = json.dumps(valid).replace(f'"{number_field}": 0', f'"{number_field}": {constant}')
        else:  # a non-finite number where a string belongs
            text = text.replace(json.dumps(target.valid[field]), constant, 1)
        return target, text, kind
    if kind == "deep":
        depth = rng.choice([64, 500, 5_000, 50_000, 200_000])
        text = json.dumps(valid)
        return target, text.replace(json.dumps(target.valid[field]), _nested(depth), 1), kind
    if kind == "huge":
        size = rng.choice([10_000, 100_000, 1_000_000])
        # a huge string value in a string field, and a broken type elsewhere, so it can never pass
        valid[field] = "A" * size
        others = [f for f in target.fields if f != field]
        if others:
            valid[others[0]] = {"huge": True}
            return target, json.dumps(valid), kind
        return target, json.dumps(valid)[:-1], kind  # the only field: cut the closing brace
    if kind == "unicode":
        junk = rng.choice(_JUNK_TEXT)
        valid[junk + str(i)] = junk  # an unknown key made of junk, and junk in a wrong place
        valid[field] = {junk: [junk]}
        return target, json.dumps(valid, ensure_ascii=rng.random() < 0.5), kind
    # "surrogate": lone surrogates, escaped in the JSON text or raw (as a provider's decoded JSON carries them)
    escaped = rng.choice(["\\ud800", "\\udfff", "\\udc00\\ud800", "\\ud83d"])
    text = json.dumps(valid)
    if rng.random() < 0.5:
        return target, text.replace(json.dumps(target.valid[field]), f'"{escaped}x{i}"', 1), kind
    raw = chr(0xD800 + i % 0x800)
    return target, text.replace(json.dumps(target.valid[field]), f'"{raw}{i}"', 1), kind


def payloads() -> list[tuple[Target, str, str]]:
    rng = random.Random(20261122)
    return [make_payload(i, rng) for i in range(PAYLOADS)]


def batch_model(calls: list[ToolCall]) -> FunctionModel:
    batches = iter([calls[i : i + BATCH] for i in range(0, len(calls), BATCH)])

    def respond(messages: list[Message], info: AgentInfo) -> str | list[ToolCall]:
        return next(batches, None) or "all refused"

    return FunctionModel(respond)


async def test_a_thousand_malformed_payloads_are_error_results_and_nothing_crashes(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("a\n")
    generated = payloads()
    assert len(generated) == PAYLOADS
    assert {kind for _, _, kind in generated} == {
        "invalid_json",
        "non_object",
        "missing",
        "extra",
        "wrong_type",
        "nan",
        "deep",
        "huge",
        "unicode",
        "surrogate",
    }
    calls = [
        ToolCall(id=f"m{i}", name=target.tool, arguments=text)
        for i, (target, text, _) in enumerate(generated)
    ]
    toolset = MCPToolset(demo())
    tools = [builtin_tool(name, workspace) for name in ("read_file", "edit_file", "search_files")]
    agent = Agent(
        batch_model(calls),
        tools=[*tools, configure, toolset],
        workspace=workspace,
        # the payloads are meant to be huge: a window that holds them all (the test is about tools)
        config={
            "max_tool_iterations": PAYLOADS // BATCH + 5,
            "repeat_limit": 1000,
            "context_window": 50_000_000,
        },
    )
    ended: list[object] = []
    agent.on("tool_call_end", ended.append)  # a listener: the events see every payload too
    try:
        report = await agent.run("break everything", session_id="hostile-args")
    finally:
        await agent.aclose()
    assert (report.reason, report.final_text, report.error) == ("done", "all refused", None)
    assert len(ended) == PAYLOADS
    assert [r.run_id for r in await agent.store.list_reports("hostile-args")] == [report.run_id]

    # the transcript on disk loads back whole in a fresh agent: every call answered exactly once
    reloaded = Agent(ScriptedModel([]), workspace=workspace)
    loaded = await reloaded.store.load("hostile-args")
    assert loaded.warnings == []
    assert_paired(loaded.messages)
    results = {m.tool_call_id: m for m in loaded.messages if isinstance(m, ToolResultMessage)}
    assert len(results) == PAYLOADS
    wrong = []
    for call, (target, text, kind) in zip(calls, generated, strict=True):
        result = results[call.id]
        if not result.is_error or not result.content or len(result.content) > MAX_ERROR_CHARS:
            wrong.append(f"{kind} {target.tool} {text[:80]!r}: {result.is_error} {result.content[:160]!r}")
    assert not wrong, "\n".join(wrong[:15]) + f"\n({len(wrong)} of {PAYLOADS})"
    assert (workspace / "notes.txt").read_text() == "a\n"  # no payload got through to edit the file


@pytest.mark.parametrize(
    ("target", "text", "expected"),
    [
        ("read_file", "{", "invalid arguments for tool 'read_file': arguments are not valid JSON"),
        (
            "read_file",
            "[1]",
            "invalid arguments for tool 'read_file': arguments must be a JSON object, not an array",
        ),
        ("read_file", "{}", "invalid arguments for tool 'read_file': missing required argument 'path'"),
        (
            "read_file",
            '{"path": "x", "evil": 1}',
            "invalid arguments for tool 'read_file': unknown argument 'evil' (expected: path, offset, limit)",
        ),
        (
            "read_file",
            '{"path": 5}',
            "invalid arguments for tool 'read_file': path: Input should be a valid string",
        ),
        ("demo__add", "{", "invalid arguments for tool 'demo__add': arguments are not valid JSON"),
        (
            "demo__add",
            "null",
            "invalid arguments for tool 'demo__add': arguments must be a JSON object, not null",
        ),
        ("demo__add", '{"a": 1}', "invalid arguments for tool 'demo__add': 'b' is a required property"),
        (
            "demo__add",
            '{"a": "x", "b": 1}',
            "invalid arguments for tool 'demo__add': a: 'x' is not of type 'integer'",
        ),
        (
            "demo__add",
            '{"a": NaN, "b": 1}',
            "invalid arguments for tool 'demo__add': NaN is not a JSON number",
        ),
        ("demo__add", '{"a": 1, "b": ' + "[" * 100_000, "invalid arguments for tool 'demo__add': "),
        (
            "demo__echo",
            '{"text": "\\ud800"}',
            "invalid arguments for tool 'demo__echo': arguments contain invalid Unicode",
        ),
    ],
)
async def test_each_kind_of_defect_gets_a_specific_message(
    tmp_path: Path, target: str, text: str, expected: str
) -> None:
    toolset = MCPToolset(demo())
    model = ScriptedModel([[ToolCall(id="x", name=target, arguments=text)], "ok"])
    async with Agent(model, tools=[builtin_tool("read_file", tmp_path), toolset]) as agent:
        report = await agent.run("go")
    [call] = report.steps[0].tool_calls
    assert call.error is not None and call.error.startswith(expected), call.error


def test_nan_and_infinity_are_refused_for_float_arguments() -> None:
    for constant in ("NaN", "Infinity", "-Infinity"):
        text = f'{{"name": "n", "count": 1, "ratio": {constant}, "tags": [], "options": {{}}}}'
        with pytest.raises(Exception, match="finite"):
            configure.validate(text)


async def test_raw_lone_surrogates_in_arguments_do_not_break_a_workspace_run(tmp_path: Path) -> None:
    raw = '{"path": "\ud800.txt"}'  # the character itself, as a provider's decoded JSON can carry it
    model = ScriptedModel([[ToolCall(id="s", name="read_file", arguments=raw)], "ok"])
    agent = Agent(model, tools=[builtin_tool("read_file", tmp_path)], workspace=tmp_path)
    report = await agent.run("go", session_id="surrogate")
    assert report.reason == "done", report.error
    loaded = await agent.store.load("surrogate")
    assert_paired(loaded.messages)


async def test_deeply_nested_arguments_with_a_listener_and_a_saved_report(tmp_path: Path) -> None:
    deep = '{"path": ' + "[" * 100_000 + "]" * 100_000 + "}"
    model = ScriptedModel([[ToolCall(id="d", name="read_file", arguments=deep)], "ok"])
    agent = Agent(model, tools=[builtin_tool("read_file", tmp_path)], workspace=tmp_path)
    seen: list[object] = []
    agent.on("*", seen.append)
    report = await agent.run("go", session_id="deep")
    assert report.reason == "done", report.error
    assert [r.run_id for r in await agent.store.list_reports("deep")] == [report.run_id]
