"""The workspace folder and AGENT.md: parsing, validation with line numbers, tool resolution, init."""

from __future__ import annotations

import logging
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwright import FunctionTool
from loopwright.config import LoopConfig
from loopwright.errors import AgentDefinitionError, ConfigError
from loopwright.tools.base import Tool, ToolContext
from loopwright.tools.builtin import BUILTIN_TOOL_NAMES
from loopwright.workspace import AgentDefinition, Workspace, init_workspace, parse_agent_md

BUILTIN = BUILTIN_TOOL_NAMES[0]


@pytest.fixture(autouse=True)
def _forget_imported_tools() -> Iterator[None]:
    """Tool modules imported by a test must not leak into the next one."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(("loopwright_ws_", "lw_installed_")):
            del sys.modules[name]


def md(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def problems(text: str) -> list[tuple[str, int | None]]:
    with pytest.raises(AgentDefinitionError) as caught:
        parse_agent_md(md(text))
    return [(p.field, p.line) for p in caught.value.problems]


def messages(text: str) -> dict[str, str]:
    with pytest.raises(AgentDefinitionError) as caught:
        parse_agent_md(md(text))
    return {p.field: p.message for p in caught.value.problems}


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, content in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(md(content), encoding="utf-8")
    return root


def ctx(name: str) -> ToolContext:
    return ToolContext(run_id="r", session_id="s", call_id="c", tool_name=name, step=1)


# ------------------------------------------------------------------------------------- valid AGENT.md


def test_no_frontmatter_means_the_whole_file_is_the_body() -> None:
    definition = parse_agent_md("\n# Helper\n\nBe brief.\n", "/agents/helper/AGENT.md")
    assert definition == AgentDefinition(
        name="helper", system="# Helper\n\nBe brief.", path=Path("/agents/helper/AGENT.md")
    )


def test_full_frontmatter() -> None:
    definition = parse_agent_md(
        md(f"""
        ---
        name: scout
        description: Finds things.
        model: gpt-4o-mini
        tools: [{BUILTIN}, weather:get_weather, my.pkg.tools:lookup]
        max_tool_iterations: 4
        toolTimeout: 5
        parallelToolCalls: false
        ---

        You are Scout.
        """)
    )
    assert definition.name == "scout"
    assert definition.description == "Finds things."
    assert definition.model == "gpt-4o-mini"
    assert definition.tools == [BUILTIN, "weather:get_weather", "my.pkg.tools:lookup"]
    assert definition.system == "You are Scout."
    assert definition.loop == {"max_tool_iterations": 4, "tool_timeout": 5.0, "parallel_tool_calls": False}
    assert isinstance(definition.loop["tool_timeout"], float)


def test_model_list_is_a_fallback_chain() -> None:
    definition = parse_agent_md("---\nmodel:\n  - primary\n  - ' backup '\n---\n")
    assert definition.model == ["primary", "backup"]


@pytest.mark.parametrize("field", sorted(LoopConfig.model_fields))
@pytest.mark.parametrize("camel", [False, True])
def test_every_loop_setting_in_both_spellings(field: str, camel: bool) -> None:
    alias = LoopConfig.model_fields[field].alias
    assert alias is not None
    default = getattr(LoopConfig(), field)
    value = str(default).lower() if isinstance(default, bool) else str(default)
    definition = parse_agent_md(f"---\n{alias if camel else field}: {value}\n---\n")
    assert definition.loop == {field: default}


def test_loop_settings_feed_loop_config() -> None:
    definition = parse_agent_md("---\nmaxToolIterations: 3\ntool_timeout: 2.5\nmax_retries: 0\n---\n")
    config = LoopConfig.resolve(frontmatter=definition.loop, environ={})
    assert (config.max_tool_iterations, config.tool_timeout, config.max_retries) == (3, 2.5, 0)
    assert config.context_window == LoopConfig().context_window
    overridden = LoopConfig.resolve(frontmatter=definition.loop, environ={"LOOPWRIGHT_TOOL_TIMEOUT": "9"})
    assert overridden.tool_timeout == 9.0


def test_loop_values_follow_loop_config_coercion() -> None:
    definition = parse_agent_md("---\nmax_tool_iterations: '7'\nretry_backoff: 2\n---\n")
    assert definition.loop == {"max_tool_iterations": 7, "retry_backoff": 2.0}


def test_empty_values_mean_the_default() -> None:
    definition = parse_agent_md(
        "---\nname:\ndescription:\nmodel:\ntools:\nmax_retries:\n---\nHi\n", "w/AGENT.md"
    )
    assert definition == AgentDefinition(name="w", system="Hi", path=Path("w/AGENT.md"))


def test_empty_frontmatter_empty_body_and_no_description_is_valid() -> None:
    assert parse_agent_md("---\n---\n", "AGENT.md") == AgentDefinition(name="agent", path=Path("AGENT.md"))
    assert parse_agent_md("---\n# only a comment\n---\n").system == ""
    assert parse_agent_md("").system == ""


def test_later_fences_stay_in_the_body() -> None:
    definition = parse_agent_md("---\nname: a\n---\nabove\n---\nbelow\n")
    assert definition.system == "above\n---\nbelow"


def test_windows_line_endings_and_bom() -> None:
    ok = parse_agent_md("\ufeff---\r\nname: a\r\n---\r\nline one\r\nline two\r\n")
    assert (ok.name, ok.system) == ("a", "line one\nline two")
    assert problems("\ufeff---\r\nname: a\r\nbad: 1\r\n---\r\n") == [("bad", 3)]


def test_description_and_name_are_stripped() -> None:
    definition = parse_agent_md("---\nname: '  x  '\ndescription: |\n  Two\n  lines.\n---\n")
    assert (definition.name, definition.description) == ("x", "Two\nlines.")


# ---------------------------------------------------------------------------------- invalid AGENT.md


def test_every_bad_field_is_reported_at_once_with_its_line() -> None:
    text = """
        ---
        name: 5
        description: fine
        maxToolIterations: ten
        tool_timeout: -1
        tools: read_file
        modle: gpt
        parallel_tool_calls: maybe
        max_retries: no
        repeat_limit: 1
        ---
        body
        """
    assert problems(text) == [
        ("name", 2),
        ("maxToolIterations", 4),
        ("tool_timeout", 5),
        ("tools", 6),
        ("modle", 7),
        ("parallel_tool_calls", 8),
        ("max_retries", 9),
        ("repeat_limit", 10),
    ]
    found = messages(text)
    assert found["name"] == "expected text, got int 5"
    assert "valid integer" in found["maxToolIterations"] and "'ten'" in found["maxToolIterations"]
    assert found["tool_timeout"] == "Input should be greater than 0 (got -1)"
    assert found["tools"] == "expected a list, e.g. [read_file]"
    assert found["modle"] == "unknown key; did you mean 'model'?"
    assert "valid boolean" in found["parallel_tool_calls"]
    assert found["max_retries"].startswith("expected a number, got false")
    assert found["repeat_limit"] == "Input should be greater than or equal to 2 (got 1)"


def test_error_message_names_the_file_and_each_line() -> None:
    with pytest.raises(AgentDefinitionError) as caught:
        parse_agent_md("---\nname: a\nbogus: 1\nmax_retries: -1\n---\n", "ws/AGENT.md")
    assert caught.value.path == "ws/AGENT.md"
    text = str(caught.value)
    assert text.startswith("invalid agent definition 'ws/AGENT.md':")
    assert "line 3: bogus: unknown key" in text
    assert "line 4: max_retries: Input should be greater than or equal to 0" in text


def test_bad_tool_entries_are_reported_on_their_own_lines() -> None:
    text = f"""
        ---
        tools:
          - {BUILTIN}
          - {BUILTIN}x
          - 1
          - weather:get
          - weather:get
          - not valid
          - class:x
          - weather:
        ---
        """
    assert problems(text) == [
        ("tools[1]", 4),
        ("tools[2]", 5),
        ("tools[4]", 7),
        ("tools[5]", 8),
        ("tools[6]", 9),
        ("tools[7]", 10),
    ]
    found = messages(text)
    assert found["tools[1]"].startswith(f"unknown tool '{BUILTIN}x': did you mean '{BUILTIN}'?")
    assert "'module:function'" in found["tools[1]"]
    assert found["tools[2]"] == "expected a tool name, got int 1"
    assert found["tools[4]"] == "'weather:get' is listed twice (first on line 6)"
    assert found["tools[5]"].startswith("unknown tool 'not valid': use a built-in name")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("read_file", "expected a list, e.g. [read_file]"),
        ("read_file, weather:get", "expected a list, e.g. [read_file, weather:get]"),
        ("{a: 1}", "expected a list of tool names, e.g. [read_file], got a mapping"),
        ("3", "expected a list of tool names, e.g. [read_file], got int 3"),
    ],
)
def test_tools_must_be_a_list(value: str, message: str) -> None:
    assert messages(f"---\ntools: {value}\n---\n") == {"tools": message}


def test_model_problems() -> None:
    text = "---\nmodel: [good, 3, '']\n---\n"
    assert messages(text) == {"model[1]": "expected text, got int 3", "model[2]": "must not be empty"}
    assert messages("---\nmodel: []\n---\n") == {
        "model": "expected a model name or a list of them (a fallback chain), got a list"
    }
    assert messages("---\nmodel: {a: 1}\n---\n")["model"].endswith("got a mapping")


def test_duplicate_keys_in_either_spelling() -> None:
    text = "---\nname: a\nmax_retries: 1\nname: b\nmaxRetries: 2\n---\n"
    assert problems(text) == [("name", 4), ("maxRetries", 5)]
    found = messages(text)
    assert found["name"] == "set twice: already set on line 2"
    assert found["maxRetries"] == "set twice: already set as 'max_retries' on line 3"


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("maxToolIteration", "did you mean 'maxToolIterations'?"),
        ("max_tool_iteration", "did you mean 'max_tool_iterations'?"),
        ("desciption", "did you mean 'description'?"),
        ("banana", "expected name, description, model, tools or a loop setting"),
    ],
)
def test_unknown_keys_suggest_the_closest(key: str, hint: str) -> None:
    assert hint in messages(f"---\n{key}: 1\n---\n")[key]


def test_malformed_yaml_reports_the_yaml_line() -> None:
    assert problems("---\nname: a\ndescription: b\n  nested: [\n---\nbody\n") == [("frontmatter", 4)]
    assert messages("---\nname: 'open\n---\n") == {
        "frontmatter": "invalid YAML: while scanning a quoted scalar: found unexpected end of stream"
    }
    assert problems("---\na: 1\n\tb: 2\n---\n") == [("frontmatter", 3)]
    assert messages("---\nname: a\ndescription: x\x07\n---\n") == {
        "frontmatter": "invalid YAML: character U+0007 is not allowed (special characters are not allowed)"
    }
    assert problems("---\nname: a\ndescription: x\x07\n---\n") == [("frontmatter", 3)]


@pytest.mark.parametrize(
    ("frontmatter", "message", "line"),
    [
        ("- a\n- b", "expected 'key: value' settings, got a list", 2),
        ("\n\njust words", "expected 'key: value' settings, got a single value", 4),
        ("? [a, b]\n: 1", "keys must be plain names", 2),
    ],
)
def test_frontmatter_must_be_a_mapping(frontmatter: str, message: str, line: int) -> None:
    with pytest.raises(AgentDefinitionError) as caught:
        parse_agent_md(f"---\n{frontmatter}\n---\n")
    assert [(p.field, p.message, p.line) for p in caught.value.problems] == [("frontmatter", message, line)]


def test_unterminated_frontmatter() -> None:
    with pytest.raises(AgentDefinitionError) as caught:
        parse_agent_md("---\nname: a\nbody without a fence\n")
    (problem,) = caught.value.problems
    assert (problem.field, problem.line) == ("frontmatter", 1)
    assert "no closing '---' line" in problem.message


def test_unsafe_and_unknown_tags_are_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f"""
        ---
        name: !!python/object/apply:os.system ["touch {marker}"]
        description: !custom thing
        model: !!str fine
        ---
        """
    assert problems(text) == [("name", 2), ("description", 3)]
    assert "could not determine a constructor" in messages(text)["name"]
    assert not marker.exists()


def test_values_yaml_cannot_build_are_field_problems() -> None:
    assert messages("---\ndescription: 2024-13-45\n---\n") == {
        "description": "invalid value: month must be in 1..12"
    }


def test_hostile_yaml_fails_cleanly_and_quickly() -> None:
    deep = "---\nname: " + "[" * 5000 + "]" * 5000 + "\n---\n"
    assert messages(deep) == {"frontmatter": "invalid YAML: nested too deeply"}
    levels = ["a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for previous, current in zip("abcdefg", "bcdefgh", strict=True):
        levels.append(f"{current}: &{current} [" + ", ".join([f"*{previous}"] * 9) + "]")
    bomb = "---\n" + "\n".join(levels) + "\nmax_retries: *h\n---\n"
    found = messages(bomb)
    assert found["max_retries"] == "Input should be a valid integer (got a list)"
    long = messages("---\nmax_retries: " + "x" * 500 + "\n---\n")["max_retries"]
    assert len(long) < 150 and long.endswith("...)")


@given(st.text())
def test_any_frontmatter_parses_or_fails_with_lines_in_the_file(frontmatter: str) -> None:
    text = f"---\n{frontmatter}\n---\nbody\n"
    try:
        parse_agent_md(text)
    except AgentDefinitionError as exc:
        assert exc.problems
        last = len(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
        assert all(p.line is not None and 1 <= p.line <= last for p in exc.problems)


@given(st.text())
def test_the_body_is_kept_verbatim_apart_from_line_endings(body: str) -> None:
    definition = parse_agent_md("---\nname: a\n---\n" + body)
    assert definition.system == body.replace("\r\n", "\n").replace("\r", "\n").strip()


# ---------------------------------------------------------------------------------------- workspace


def test_workspace_paths(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "a" / ".." / "agent")
    root = tmp_path / "agent"
    assert workspace.root == root
    assert (workspace.agent_md, workspace.memory_md) == (root / "AGENT.md", root / "MEMORY.md")
    assert (workspace.sessions_dir, workspace.tools_dir, workspace.memory_dir) == (
        root / "sessions",
        root / "tools",
        root / "memory",
    )
    assert repr(workspace) == f"Workspace({str(root)!r})"


def test_load_definition(tmp_path: Path) -> None:
    write(tmp_path / "helper", {"AGENT.md": "---\ndescription: Helps.\n---\nBe kind.\n"})
    definition = Workspace(tmp_path / "helper").load_definition()
    assert definition == AgentDefinition(
        name="helper", description="Helps.", system="Be kind.", path=tmp_path / "helper" / "AGENT.md"
    )


def test_load_definition_missing_root_or_agent_md(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError, match=r"does not exist; run `loopwright init .*nope`"):
        Workspace(missing).load_definition()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is not a folder"):
        Workspace(tmp_path / "file").load_definition()
    with pytest.raises(ConfigError) as caught:
        Workspace(tmp_path).load_definition()
    assert str(caught.value) == (
        f"no AGENT.md in {str(tmp_path)!r}; run `loopwright init {tmp_path}` to create one"
    )


def test_load_definition_reports_bad_files_with_their_path(tmp_path: Path) -> None:
    (tmp_path / "AGENT.md").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ConfigError, match=r"cannot read .*AGENT\.md.*utf-8"):
        Workspace(tmp_path).load_definition()
    (tmp_path / "AGENT.md").write_text("---\nmax_retries: -2\n---\n")
    with pytest.raises(AgentDefinitionError) as caught:
        Workspace(tmp_path).load_definition()
    assert caught.value.path == str(tmp_path / "AGENT.md")
    assert [(p.field, p.line) for p in caught.value.problems] == [("max_retries", 2)]


def test_read_memory(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    workspace = Workspace(tmp_path)
    assert workspace.read_memory() == ""
    workspace.memory_md.write_text("# Memory\n- likes tea\n", encoding="utf-8")
    assert workspace.read_memory() == "# Memory\n- likes tea\n"
    workspace.memory_md.write_bytes(b"caf\xe9")
    with caplog.at_level(logging.WARNING, logger="loopwright"):
        assert workspace.read_memory() == ""
    assert [r.name for r in caplog.records] == ["loopwright"]
    assert "MEMORY.md" in caplog.records[0].getMessage()


def test_read_memory_that_is_a_folder(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "MEMORY.md").mkdir()
    with caplog.at_level(logging.WARNING, logger="loopwright"):
        assert Workspace(tmp_path).read_memory() == ""
    assert len(caplog.records) == 1


# ------------------------------------------------------------------------------------ tool resolution

WEATHER = '''
    from loopwright import tool


    def get_weather(city: str) -> str:
        """Report the weather in a city."""
        return f"{city}: {FORECAST}"


    @tool
    def decorated(city: str) -> str:
        """Already a tool."""
        return city.upper()


    FORECAST = "sunny"
    NOT_A_TOOL = 3


    class Weather:
        pass


    def untyped(city):
        return city
'''


def resolve(workspace: Workspace, *tools: str) -> list[Tool]:
    return workspace.resolve_tools(AgentDefinition(name="t", tools=list(tools)))


def test_builtin_tools_resolve_by_name(tmp_path: Path) -> None:
    tools = resolve(Workspace(tmp_path), *BUILTIN_TOOL_NAMES)
    assert [t.name for t in tools] == list(BUILTIN_TOOL_NAMES)
    assert all(isinstance(t, Tool) for t in tools)


async def test_workspace_functions_become_tools(tmp_path: Path) -> None:
    workspace = Workspace(write(tmp_path, {"tools/weather.py": WEATHER}))
    plain, decorated = resolve(workspace, "weather:get_weather", "weather:decorated")
    assert isinstance(plain, FunctionTool) and isinstance(decorated, FunctionTool)
    assert (plain.name, plain.description) == ("get_weather", "Report the weather in a city.")
    assert plain.parameters["required"] == ["city"]
    assert await plain.call(plain.validate('{"city": "Oslo"}'), ctx("get_weather")) == "Oslo: sunny"
    assert await decorated.call(decorated.validate('{"city": "oslo"}'), ctx("decorated")) == "OSLO"


async def test_same_module_names_in_two_workspaces_do_not_collide(tmp_path: Path) -> None:
    paths_before = list(sys.path)
    first = Workspace(write(tmp_path / "one", {"tools/weather.py": WEATHER}))
    second = Workspace(write(tmp_path / "two", {"tools/weather.py": WEATHER.replace('"sunny"', '"rainy"')}))
    (sunny,) = resolve(first, "weather:get_weather")
    (rainy,) = resolve(second, "weather:get_weather")
    assert await sunny.call({"city": "Oslo"}, ctx("get_weather")) == "Oslo: sunny"
    assert await rainy.call({"city": "Oslo"}, ctx("get_weather")) == "Oslo: rainy"
    assert sys.path == paths_before
    assert "weather" not in sys.modules


async def test_packages_and_relative_imports_in_tools(tmp_path: Path) -> None:
    workspace = Workspace(
        write(
            tmp_path,
            {
                "tools/helpers.py": "GREETING = 'hello'\n",
                "tools/kit/__init__.py": "",
                "tools/kit/greet.py": """
                    from ..helpers import GREETING


                    def greet(name: str) -> str:
                        \"\"\"Greet someone.\"\"\"
                        return f"{GREETING} {name}"
                """,
            },
        )
    )
    (greet,) = resolve(workspace, "kit.greet:greet")
    assert await greet.call({"name": "Ada"}, ctx("greet")) == "hello Ada"


async def test_installed_modules_resolve_by_qualified_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path / "site",
        {
            "lw_installed_pkg/__init__.py": "",
            "lw_installed_pkg/tools.py": """
                def shout(text: str) -> str:
                    \"\"\"Shout.\"\"\"
                    return text.upper()
            """,
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    (shout,) = resolve(Workspace(tmp_path / "ws"), "lw_installed_pkg.tools:shout")
    assert await shout.call({"text": "hi"}, ctx("shout")) == "HI"


@pytest.mark.parametrize(
    ("files", "entry", "message"),
    [
        ({}, "weather:get_weather", "no module 'weather' in {tools} or among installed packages"),
        ({}, "lw_installed_missing.sub:fn", "no module 'lw_installed_missing.sub' in {tools} or among"),
        ({"tools/weather.py": WEATHER}, "weather:nope", "module 'weather' has no attribute 'nope'"),
        ({"tools/weather.py": WEATHER}, "weather.sub:fn", "no module 'weather.sub' in {tools}"),
        ({"tools/weather.py": WEATHER}, "weather:NOT_A_TOOL", "expected a function or a Tool, got int"),
        ({"tools/weather.py": WEATHER}, "weather:Weather", "'Weather' is a class; name a function or a Tool"),
        ({"tools/weather.py": WEATHER}, "weather:untyped", "cannot make a tool of <function untyped"),
        (
            {"tools/boom.py": "raise RuntimeError('no network here')\n"},
            "boom:fn",
            "importing 'boom' failed: RuntimeError: no network here",
        ),
        (
            {"tools/deps.py": "import lw_installed_not_there\n"},
            "deps:fn",
            "importing 'deps' failed: ModuleNotFoundError: No module named 'lw_installed_not_there'",
        ),
        ({"tools/broken.py": "def f(:\n"}, "broken:f", "importing 'broken' failed: SyntaxError: "),
        ({}, "no_such_tool", "no built-in tool 'no_such_tool'; built-ins are "),
        ({}, "bad path:x", "expected 'module:function'"),
    ],
)
def test_tool_resolution_failures_name_the_entry_and_cause(
    tmp_path: Path, files: dict[str, str], entry: str, message: str
) -> None:
    workspace = Workspace(write(tmp_path, files))
    with pytest.raises(ConfigError) as caught:
        resolve(workspace, entry)
    text = str(caught.value)
    assert text.startswith(f"cannot load the tools of agent 't':\n  {entry!r}: ")
    assert message.format(tools=repr(str(workspace.tools_dir))) in text
    assert "Traceback" not in text and "loopwright_ws_" not in text


def test_every_tool_failure_is_listed_at_once(tmp_path: Path) -> None:
    workspace = Workspace(write(tmp_path, {"tools/weather.py": WEATHER}))
    with pytest.raises(ConfigError) as caught:
        resolve(workspace, "weather:nope", "weather:get_weather", "missing:fn")
    lines = str(caught.value).splitlines()
    assert lines[1:] == [
        "  'weather:nope': module 'weather' has no attribute 'nope'",
        f"  'missing:fn': no module 'missing' in {str(workspace.tools_dir)!r} or among installed packages",
    ]


def test_duplicate_tool_names_are_refused(tmp_path: Path) -> None:
    workspace = Workspace(
        write(
            tmp_path,
            {
                "tools/weather.py": WEATHER,
                "tools/other.py": f"def {BUILTIN}(city: str) -> str:\n    return city\n"
                "def get_weather(city: str) -> str:\n    return city\n",
            },
        )
    )
    with pytest.raises(ConfigError) as caught:
        resolve(workspace, "weather:get_weather", BUILTIN, "other:get_weather", f"other:{BUILTIN}")
    assert str(caught.value).splitlines()[1:] == [
        "  'other:get_weather': tool name 'get_weather' is already provided by 'weather:get_weather'",
        f"  'other:{BUILTIN}': tool name '{BUILTIN}' is already provided by '{BUILTIN}'",
    ]


# --------------------------------------------------------------------------------------------- init


async def test_init_creates_a_working_workspace(tmp_path: Path) -> None:
    workspace = init_workspace(tmp_path / "scout")
    assert workspace.root == tmp_path / "scout"
    assert workspace.agent_md.is_file() and workspace.sessions_dir.is_dir()
    assert workspace.read_memory().startswith("# Memory\n")
    assert (workspace.tools_dir / "example.py").is_file()

    definition = workspace.load_definition()
    assert (definition.name, definition.model) == ("scout", "test")
    assert definition.description
    assert definition.loop == {}
    assert "example:word_count" in definition.tools
    assert definition.system.startswith("# scout\n\nYou are scout,")
    assert "## How you work" in definition.system

    tools = workspace.resolve_tools(definition)
    assert [t.name for t in tools] == [*definition.tools[:-1], "word_count"]
    word_count = tools[-1]
    assert word_count.description == "Count the words, lines and characters in a piece of text."
    result = await word_count.call(word_count.validate('{"text": "one two\\nthree"}'), ctx("word_count"))
    assert result == {"words": 3, "lines": 2, "characters": 13}


def test_init_name_and_model_are_quoted_when_needed(tmp_path: Path) -> None:
    workspace = init_workspace(tmp_path / "x", name="Ada: the #1 helper", model="openai:gpt-4o")
    definition = workspace.load_definition()
    assert (definition.name, definition.model) == ("Ada: the #1 helper", "openai:gpt-4o")
    assert "You are Ada: the #1 helper," in definition.system
    assert init_workspace(tmp_path / "y", name="yes").load_definition().name == "yes"


def test_init_commented_settings_are_valid_defaults(tmp_path: Path) -> None:
    text = init_workspace(tmp_path).agent_md.read_text(encoding="utf-8")
    example = re.compile(r"# (\w+): ")
    lines = [
        line[2:] if (m := example.match(line)) and m.group(1) in LoopConfig.model_fields else line
        for line in text.splitlines()
    ]
    definition = parse_agent_md("\n".join(lines))
    assert len(definition.loop) >= 5
    defaults = LoopConfig()
    assert definition.loop == {name: getattr(defaults, name) for name in definition.loop}


def test_init_refuses_to_overwrite_agent_md(tmp_path: Path) -> None:
    workspace = init_workspace(tmp_path, name="first")
    workspace.memory_md.write_text("keep me", encoding="utf-8")
    (workspace.tools_dir / "example.py").write_text(
        "from loopwright import tool\n\n\n@tool\ndef word_count(text: str) -> int:\n"
        '    """Edited."""\n    return 0\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"AGENT.md' already exists; use `loopwright init --force`"):
        init_workspace(tmp_path, name="second")
    assert workspace.load_definition().name == "first"

    init_workspace(tmp_path, name="second", force=True)
    assert workspace.load_definition().name == "second"
    assert workspace.read_memory() == "keep me"
    assert "Edited." in (workspace.tools_dir / "example.py").read_text(encoding="utf-8")


def test_init_refuses_a_file_and_bad_names_or_models(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="it is a file"):
        init_workspace(tmp_path / "file")
    with pytest.raises(ConfigError, match="invalid agent name 'a\\\\nb'"):
        init_workspace(tmp_path / "w", name="a\nb")
    with pytest.raises(ConfigError, match="invalid model ''"):
        init_workspace(tmp_path / "w", model="")
    assert not (tmp_path / "w").exists()
