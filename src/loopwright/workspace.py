"""The workspace folder and its ``AGENT.md``.

A workspace is a folder that *is* an agent::

    AGENT.md      frontmatter (name, description, model, tools, loop settings) + the system prompt
    MEMORY.md     durable notes (may be missing)
    sessions/     transcripts, written by the session store
    tools/        Python modules whose functions AGENT.md can name as tools (``weather:get_weather``)
    memory/       dated notes

:func:`parse_agent_md` turns the file's text into an :class:`AgentDefinition`, reporting every bad
field at once with its line; :class:`Workspace` finds the files and resolves the named tools;
:func:`init_workspace` creates a working example.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import keyword
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from yaml.error import Mark
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from loopwright.config import LoopConfig
from loopwright.errors import AgentDefinitionError, ConfigError, FieldProblem
from loopwright.tools._function import tool
from loopwright.tools.base import Tool
from loopwright.tools.builtin import BUILTIN_TOOL_NAMES, builtin_tool

__all__ = ["AgentDefinition", "Workspace", "init_workspace", "parse_agent_md"]

_log = logging.getLogger("loopwright")

_FENCE = "---"
_AGENT_KEYS = ("name", "description", "model", "tools", "permissions", "mcp", "plugins")
#: Every accepted spelling of a loop setting (snake_case and camelCase) -> its LoopConfig field.
_LOOP_KEYS = {
    spelling: name
    for name, info in LoopConfig.model_fields.items()
    for spelling in (name, info.alias or name)
}
_KNOWN_KEYS = (*_AGENT_KEYS, *_LOOP_KEYS)
_DEFAULT_NAME = "agent"
_MAX_SHOWN = 60


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDefinition:
    """What ``AGENT.md`` says about an agent, validated."""

    name: str = _DEFAULT_NAME
    description: str = ""
    model: str | list[str] | None = None
    """A model name, or a fallback chain tried in order."""
    tools: list[str] = field(default_factory=list)
    """Built-in tool names and ``module:function`` paths, as written."""
    permissions: dict[str, str] = field(default_factory=dict)
    """Permission rules: tool name, glob or ``group:NAME`` -> allow / ask / deny (docs/safety.md)."""
    mcp: dict[str, Any] = field(default_factory=dict)
    """MCP servers by name (docs/mcp.md)."""
    plugins: list[str] = field(default_factory=list)
    """Installed plugins to load, by entry-point name (docs/hooks.md)."""
    system: str = ""
    """The markdown body: the agent's identity and rules (empty means the loop's default prompt)."""
    loop: dict[str, Any] = field(default_factory=dict)
    """Loop settings found in the frontmatter: snake_case keys, validated values.

    Feed them to ``LoopConfig.resolve(frontmatter=definition.loop)``."""
    path: Path | None = None


# ---------------------------------------------------------------------------------------------- parsing


def parse_agent_md(text: str, path: str = "AGENT.md") -> AgentDefinition:
    """Parse and validate the text of an ``AGENT.md``.

    The frontmatter is YAML between a first line ``---`` and the next ``---`` line; without one the
    whole text is the body. An empty value (``model:``) means the default. Raises
    :class:`AgentDefinitionError` listing every problem with its line in the file.
    """
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    settings: dict[str, Any] = {}
    body = lines
    if lines[0].rstrip() == _FENCE:
        close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == _FENCE), None)
        if close is None:
            problem = "no closing '---' line: end the frontmatter with a line holding only '---'"
            raise AgentDefinitionError(path, [FieldProblem("frontmatter", problem, 1)])
        settings = _Frontmatter(path, "\n".join(lines[1:close]), last_line=close + 1).read()
        body = lines[close + 1 :]
    return AgentDefinition(
        name=settings.pop("name", None) or Path(path).parent.name or _DEFAULT_NAME,
        description=settings.pop("description", ""),
        model=settings.pop("model", None),
        tools=settings.pop("tools", []),
        permissions=settings.pop("permissions", {}),
        mcp=settings.pop("mcp", {}),
        plugins=settings.pop("plugins", []),
        system="\n".join(body).strip(),
        loop=settings,
        path=Path(path),
    )


class _Frontmatter:
    """Reads the frontmatter YAML node by node, so that each problem keeps its line in the file."""

    def __init__(self, path: str, source: str, *, last_line: int) -> None:
        self.path = path
        self.source = source
        self.last_line = last_line  # the closing fence
        self.problems: list[FieldProblem] = []
        self.seen: dict[str, tuple[str, int]] = {}  # field -> (key as written, line)

    def line(self, node_or_mark: Node | Mark) -> int:
        """The line in the file: line 1 of the frontmatter is line 2, after the opening fence."""
        # Counted from the character index, not Mark.line: YAML also breaks lines at U+2028 and kin.
        mark = node_or_mark.start_mark if isinstance(node_or_mark, Node) else node_or_mark
        return self.source.count("\n", 0, mark.index) + 2

    def report(self, where: str, message: str, line: int) -> None:
        self.problems.append(FieldProblem(where, message, line))

    def fail(self, message: str, line: int) -> AgentDefinitionError:
        return AgentDefinitionError(self.path, [FieldProblem("frontmatter", message, line)])

    def read(self) -> dict[str, Any]:
        try:
            loader = yaml.SafeLoader(self.source)
            root = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = min(self.line(mark), self.last_line) if mark is not None else 1
            what = ": ".join(part for part in (exc.context, exc.problem) if part)
            raise self.fail(f"invalid YAML: {what}", line) from None
        except RecursionError:
            raise self.fail("invalid YAML: nested too deeply", 2) from None
        except yaml.reader.ReaderError as exc:  # a character YAML does not allow
            message = f"invalid YAML: character U+{exc.character:04X} is not allowed ({exc.reason})"
            raise self.fail(message, self.source.count("\n", 0, exc.position) + 2) from None
        if root is None:
            return {}
        if not isinstance(root, MappingNode):
            kind = "a list" if isinstance(root, SequenceNode) else "a single value"
            raise self.fail(f"expected 'key: value' settings, got {kind}", self.line(root))
        settings: dict[str, Any] = {}
        for key_node, value_node in root.value:
            found = self.read_item(loader, key_node, value_node)
            if found is not None:
                settings[found[0]] = found[1]
        if self.problems:
            raise AgentDefinitionError(self.path, self.problems)
        return settings

    def read_item(self, loader: yaml.SafeLoader, key_node: Node, node: Node) -> tuple[str, Any] | None:
        """The (field, checked value) of one ``key: value``, or ``None`` if unset or reported."""
        line = self.line(key_node)
        if not isinstance(key_node, ScalarNode):
            self.report("frontmatter", "keys must be plain names", line)
            return None
        key = str(key_node.value)
        name = _LOOP_KEYS.get(key, key)
        if name not in _AGENT_KEYS and key not in _LOOP_KEYS:
            self.report(key, _unknown_key_message(key), line)
            return None
        if name in self.seen:
            first_key, first_line = self.seen[name]
            spelled = f" as {first_key!r}" if first_key != key else ""
            self.report(key, f"set twice: already set{spelled} on line {first_line}", line)
            return None
        self.seen[name] = (key, line)
        try:
            value = loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError) as exc:
            self.report(key, f"invalid value: {getattr(exc, 'problem', None) or exc}", line)
            return None
        except RecursionError:
            self.report(key, "invalid value: nested too deeply", line)
            return None
        if value is None:
            return None
        reported = len(self.problems)
        if name in ("name", "description"):
            value = self.check_text(key, value, line, required=name == "name")
        elif name == "model":
            value = self.check_model(key, value, node, line)
        elif name == "tools":
            value = self.check_tools(key, value, node, line)
        elif name == "permissions":
            value = self.check_permissions(key, value, line)
        elif name == "mcp":
            value = self.check_mcp(key, value, line)
        elif name == "plugins":
            value = self.check_plugins(key, value, line)
        else:
            value = self.check_loop_setting(name, key, value, line)
        return (name, value) if len(self.problems) == reported else None

    def check_text(self, key: str, value: Any, line: int, *, required: bool) -> Any:
        if not isinstance(value, str):
            self.report(key, f"expected text, got {_describe(value)}", line)
        elif required and not value.strip():
            self.report(key, "must not be empty", line)
        return value.strip() if isinstance(value, str) else value

    def check_model(self, key: str, value: Any, node: Node, line: int) -> Any:
        if isinstance(value, str):
            return self.check_text(key, value, line, required=True)
        if not isinstance(value, list) or not value:
            got = _describe(value)
            self.report(key, f"expected a model name or a list of them (a fallback chain), got {got}", line)
            return value
        assert isinstance(node, SequenceNode)
        for i, (entry, entry_node) in enumerate(zip(value, node.value, strict=True)):
            self.check_text(f"{key}[{i}]", entry, self.line(entry_node), required=True)
        return [entry.strip() for entry in value if isinstance(entry, str)]

    def check_tools(self, key: str, value: Any, node: Node, line: int) -> Any:
        if isinstance(value, str):
            example = ", ".join(value.replace(",", " ").split()) or "read_file"
            self.report(key, f"expected a list, e.g. [{example}]", line)
            return value
        if not isinstance(value, list):
            self.report(key, f"expected a list of tool names, e.g. [read_file], got {_describe(value)}", line)
            return value
        assert isinstance(node, SequenceNode)
        first_seen: dict[str, int] = {}
        for i, (entry, entry_node) in enumerate(zip(value, node.value, strict=True)):
            entry_line = self.line(entry_node)
            message = _tool_entry_problem(entry)
            if message is None and entry in first_seen:
                message = f"{entry!r} is listed twice (first on line {first_seen[entry]})"
            if message is None:
                first_seen[entry] = entry_line
            else:
                self.report(f"{key}[{i}]", message, entry_line)
        return value

    def check_permissions(self, key: str, value: Any, line: int) -> Any:
        if not isinstance(value, dict):
            self.report(key, f"expected 'tool: allow|ask|deny' rules, got {_describe(value)}", line)
            return value
        for rule, decision in value.items():
            if not isinstance(rule, str) or not rule.strip():
                self.report(
                    key, f"rule names must be tool names, globs or group:NAME, got {_show(rule)}", line
                )
            elif decision not in ("allow", "ask", "deny"):
                self.report(f"{key}.{rule}", f"expected allow, ask or deny, got {_show(decision)}", line)
        return value

    def check_mcp(self, key: str, value: Any, line: int) -> Any:
        if not isinstance(value, dict):
            self.report(key, f"expected MCP servers by name, got {_describe(value)}", line)
            return value
        try:
            from loopwright.tools.mcp import parse_mcp_config

            parse_mcp_config(value)
        except ImportError:  # pragma: no cover - the MCP module ships with the package
            pass
        except (ValueError, TypeError, ConfigError) as exc:
            self.report(key, str(exc), line)
        return value

    def check_plugins(self, key: str, value: Any, line: int) -> Any:
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            self.report(key, f"expected a list of plugin names, got {_describe(value)}", line)
        return value

    def check_loop_setting(self, name: str, key: str, value: Any, line: int) -> Any:
        if isinstance(value, bool) and LoopConfig.model_fields[name].annotation is not bool:
            got = _describe(value)
            self.report(key, f"expected a number, got {got} (YAML reads yes/no/on/off as true/false)", line)
            return value
        try:
            config = LoopConfig.model_validate({name: value})
        except ValidationError as exc:
            message = "; ".join(error["msg"] for error in exc.errors())
            self.report(key, f"{message} (got {_show(value)})", line)
            return value
        return getattr(config, name)


def _unknown_key_message(key: str) -> str:
    close = difflib.get_close_matches(key, _KNOWN_KEYS, n=1, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return (
        "unknown key; expected name, description, model, tools or a loop setting (max_tool_iterations, ...)"
    )


def _tool_entry_problem(entry: Any) -> str | None:
    """Why a ``tools`` entry is unusable, or ``None``: a built-in name or ``module:function``."""
    if not isinstance(entry, str):
        return f"expected a tool name, got {_describe(entry)}"
    if entry in BUILTIN_TOOL_NAMES or _is_import_path(entry):
        return None
    close = difflib.get_close_matches(entry, BUILTIN_TOOL_NAMES, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (
        f"unknown tool {entry!r}: {hint}use a built-in name ({', '.join(BUILTIN_TOOL_NAMES)}) "
        "or 'module:function' for a function in tools/"
    )


def _is_import_path(entry: str) -> bool:
    module, colon, function = entry.partition(":")
    parts = [*module.split("."), function]
    return bool(colon) and all(part.isidentifier() and not keyword.iskeyword(part) for part in parts)


def _show(value: Any) -> str:
    """A short rendering of a value from the file (never the repr of a whole structure)."""
    if not isinstance(value, str | int | float):
        return _describe(value)
    text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return f"{type(value).__name__} {_show(value)}"
    if isinstance(value, list):
        return "a list"
    return "a mapping" if isinstance(value, dict) else type(value).__name__


# -------------------------------------------------------------------------------------------- workspace


class Workspace:
    """An agent's folder. Paths are absolute; nothing is read until asked."""

    __slots__ = ("_root",)

    def __init__(self, root: Path | str) -> None:
        self._root = Path(os.path.abspath(Path(root).expanduser()))

    def __repr__(self) -> str:
        return f"Workspace({str(self._root)!r})"

    @property
    def root(self) -> Path:
        return self._root

    @property
    def agent_md(self) -> Path:
        return self._root / "AGENT.md"

    @property
    def memory_md(self) -> Path:
        return self._root / "MEMORY.md"

    @property
    def sessions_dir(self) -> Path:
        return self._root / "sessions"

    @property
    def tools_dir(self) -> Path:
        return self._root / "tools"

    @property
    def memory_dir(self) -> Path:
        return self._root / "memory"

    def load_definition(self) -> AgentDefinition:
        """Read and validate ``AGENT.md`` (:class:`ConfigError` if missing, unreadable or invalid)."""
        if not self._root.is_dir():
            state = "is not a folder" if self._root.exists() else "does not exist"
            raise ConfigError(f"workspace {str(self._root)!r} {state}; run `loopwright init {self._root}`")
        try:
            text = self.agent_md.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(
                f"no AGENT.md in {str(self._root)!r}; run `loopwright init {self._root}` to create one"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {str(self.agent_md)!r}: {exc}") from None
        return parse_agent_md(text, str(self.agent_md))

    def read_memory(self) -> str:
        """The text of ``MEMORY.md``: ``""`` if it is missing or cannot be read (logged)."""
        try:
            return self.memory_md.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""
        except (OSError, UnicodeDecodeError) as exc:
            _log.warning("ignoring %s: %s", self.memory_md, exc)
            return ""

    def resolve_tools(self, definition: AgentDefinition) -> list[Tool]:
        """Build the tools ``definition`` names. Raises one :class:`ConfigError` listing every failure.

        ``name`` is a built-in; ``module:function`` is first looked up in this workspace's ``tools/``
        folder (imported under a private package name, so two workspaces never share a module; use
        relative imports between files there), then among installed modules. A module is imported
        once per process: edits to it take effect on the next start.
        """
        tools: list[Tool] = []
        failures: list[str] = []
        provider: dict[str, str] = {}
        for entry in definition.tools:
            try:
                found = self._import_tool(entry) if ":" in entry else self._builtin(entry)
            except ConfigError as exc:
                failures.append(f"{entry!r}: {exc}")
                continue
            if found.name in provider:
                failures.append(
                    f"{entry!r}: tool name {found.name!r} is already provided by {provider[found.name]!r}"
                )
                continue
            provider[found.name] = entry
            tools.append(found)
        if failures:
            listing = "\n".join(f"  {failure}" for failure in failures)
            raise ConfigError(f"cannot load the tools of agent {definition.name!r}:\n{listing}")
        return tools

    def _builtin(self, name: str) -> Tool:
        try:
            return builtin_tool(name, self._root)
        except KeyError:
            raise ConfigError(
                f"no built-in tool {name!r}; built-ins are {', '.join(BUILTIN_TOOL_NAMES)}"
            ) from None

    def _import_tool(self, entry: str) -> Tool:
        if not _is_import_path(entry):
            raise ConfigError("expected 'module:function'")
        module_name, _, attribute = entry.partition(":")
        top = module_name.split(".", 1)[0]
        if (self.tools_dir / f"{top}.py").is_file() or (self.tools_dir / top / "__init__.py").is_file():
            package = self._tools_package()
            qualified = f"{package}.{module_name}"
        else:
            package, qualified = "", module_name
        try:
            module = importlib.import_module(qualified)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (qualified == exc.name or qualified.startswith(exc.name + ".")):
                raise ConfigError(
                    f"no module {module_name!r} in {str(self.tools_dir)!r} or among installed packages"
                ) from None
            raise ConfigError(f"importing {module_name!r} failed: {_exception_text(exc, package)}") from None
        except Exception as exc:
            raise ConfigError(f"importing {module_name!r} failed: {_exception_text(exc, package)}") from None
        try:
            target = getattr(module, attribute)
        except AttributeError:
            raise ConfigError(f"module {module_name!r} has no attribute {attribute!r}") from None
        return _as_tool(target)

    def _tools_package(self) -> str:
        """Register (once) a package for this workspace's ``tools/`` folder and return its name."""
        tools_dir = os.path.realpath(self.tools_dir)
        name = "loopwright_ws_" + hashlib.sha256(tools_dir.encode()).hexdigest()[:16]
        if name not in sys.modules:
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [tools_dir]
            sys.modules.setdefault(name, importlib.util.module_from_spec(spec))
        return name


def _as_tool(target: Any) -> Tool:
    if isinstance(target, type):
        raise ConfigError(f"{target.__name__!r} is a class; name a function or a Tool instance")
    if isinstance(target, Tool):
        return target
    if not callable(target):
        raise ConfigError(f"expected a function or a Tool, got {type(target).__name__}")
    function: Callable[..., Any] = target
    try:
        return tool(function)
    except Exception as exc:
        raise ConfigError(f"cannot make a tool of {function!r}: {_exception_text(exc, '')}") from None


def _exception_text(exc: BaseException, package: str) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text.replace(f"{package}.", "") if package else text


# ------------------------------------------------------------------------------------------------- init


def init_workspace(
    root: Path | str, *, name: str | None = None, model: str = "test", force: bool = False
) -> Workspace:
    """Create a workspace with a commented ``AGENT.md``, ``MEMORY.md``, ``sessions/`` and an example tool.

    Refuses (:class:`ConfigError`) to replace an existing ``AGENT.md`` unless ``force``; ``MEMORY.md``
    and ``tools/example.py`` are only written when missing, so notes and edits are never lost.
    """
    workspace = Workspace(root)
    if workspace.root.exists() and not workspace.root.is_dir():
        raise ConfigError(f"cannot create a workspace at {str(workspace.root)!r}: it is a file")
    if workspace.agent_md.exists() and not force:
        raise ConfigError(
            f"{str(workspace.agent_md)!r} already exists; use `loopwright init --force` "
            "(force=True) to replace it"
        )
    agent_name = name if name is not None else (workspace.root.name or _DEFAULT_NAME)
    for what, value in (("agent name", agent_name), ("model", model)):
        if not value.strip() or not value.isprintable():
            raise ConfigError(f"invalid {what} {value!r}: use printable text on one line")
    workspace.tools_dir.mkdir(parents=True, exist_ok=True)
    workspace.sessions_dir.mkdir(exist_ok=True)
    workspace.agent_md.write_text(_agent_md_template(agent_name, model), encoding="utf-8")
    _write_if_missing(workspace.memory_md, _MEMORY_TEMPLATE)
    _write_if_missing(workspace.tools_dir / "example.py", _EXAMPLE_TOOL)
    return workspace


def _write_if_missing(path: Path, text: str) -> None:
    if not path.exists():
        path.write_text(text, encoding="utf-8")


def _yaml_text(value: str) -> str:
    """``value`` as a YAML scalar: plain when that reads back unchanged, else double-quoted."""
    if value.replace("-", "").replace("_", "").replace(".", "").isalnum() and yaml.safe_load(value) == value:
        return value
    return yaml.safe_dump(value, default_style='"', allow_unicode=True, width=1_000_000).removesuffix("\n")


def _yaml_default(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _agent_md_template(name: str, model: str) -> str:
    defaults = LoopConfig()
    examples = {key: f"# {key}: {_yaml_default(getattr(defaults, key))}" for key in _TEMPLATE_SETTINGS}
    width = max(len(example) for example in examples.values())
    settings = "\n".join(f"{examples[key]:<{width}}  # {note}" for key, note in _TEMPLATE_SETTINGS.items())
    tools = "\n".join(f"  - {tool_name}" for tool_name in _STARTER_TOOLS)
    return _AGENT_MD_TEMPLATE.format(
        name=_yaml_text(name), model=_yaml_text(model), tools=tools, settings=settings, title=name
    )


#: Tools the starter AGENT.md enables: the built-ins (all confined to the workspace) and the example.
_STARTER_TOOLS = (
    "read_file",
    "list_files",
    "search_files",
    "edit_file",
    "write_file",
    "current_time",
    "memory_write",
    "memory_search",
    "example:word_count",
)
#: Loop settings shown (commented out, with their defaults) in the starter AGENT.md.
_TEMPLATE_SETTINGS = {
    "max_tool_iterations": "tool rounds in one run before the loop stops",
    "tool_timeout": "seconds one tool call may take",
    "execution_timeout": "seconds one whole run may take",
    "context_window": "tokens the model can read at once",
    "max_tool_result_chars": "longer tool results are cut to this many characters",
    "parallel_tool_calls": "run the tool calls of one step at the same time",
}


_AGENT_MD_TEMPLATE = """\
---
# Settings for this agent. The text after the closing '---' is its system prompt.
name: {name}
description: A careful assistant that works with the files in this folder.
# One model, or a fallback chain tried in order: [first-choice, backup]
model: {model}
# Built-in tools by name; your own as module:function from this folder's tools/ directory.
tools:
{tools}
# Loop settings (snake_case or camelCase, e.g. maxToolIterations). Uncomment one to change it;
# the values shown are the defaults.
{settings}
---

# {title}

You are {title}, an assistant that works inside this folder on the user's behalf.

## How you work

- Make sure you understand the request before acting; if it is ambiguous, ask one short question.
- Use your tools to check facts about files instead of guessing, and say so when you could not check.
- Never invent file contents, tool results or sources.
- Prefer the smallest change that does the job, and say what you changed.
- Keep answers short and concrete; use lists and code blocks where they help.

## Memory

Notes in MEMORY.md are things you were asked to remember. Rely on them unless the user corrects them.
"""

_MEMORY_TEMPLATE = """\
# Memory

Durable notes for this agent: facts about the user and the project worth keeping between sessions.
"""

_EXAMPLE_TOOL = '''\
"""An example tool. AGENT.md names it as ``example:word_count``.

Any typed function in a module in this folder can be a tool: its docstring is what the model reads
and its parameters become the arguments the model must send. Import other files here relatively
(``from . import helpers``).
"""

from loopwright import tool


@tool
def word_count(text: str) -> dict[str, int]:
    """Count the words, lines and characters in a piece of text.

    Args:
        text: The text to measure.
    """
    return {"words": len(text.split()), "lines": len(text.splitlines()), "characters": len(text)}
'''
