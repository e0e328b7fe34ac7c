"""Turn a typed Python function into a :class:`~loopwright.tools.base.Tool`.

::

    @tool
    async def add(a: int, b: int) -> int:
        \"\"\"Add two integers.

        Args:
            a: The first number.
            b: The second number.
        \"\"\"
        return a + b

Everything is worked out once, at decoration time: the signature becomes a pydantic ``TypedDict``
validator (unknown fields forbidden) and a clean JSON schema; the docstring's first paragraph becomes
the description and its ``Args:`` (Google), ``:param x:`` (Sphinx) or ``Parameters`` (NumPy) section
describes each argument. On the hot path :meth:`FunctionTool.validate` is a single pydantic-core call on
the raw JSON string and returns a ``dict`` of keyword arguments; arguments the model left out are absent,
so the function's own defaults apply. :meth:`FunctionTool.call` passes that dict, plus the
:class:`~loopwright.tools.base.ToolContext` where the function declares one, to the function.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Generic, NotRequired, ParamSpec, TypeVar, overload

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python
from typing_extensions import TypedDict

from loopwright._threads import run_blocking
from loopwright.caller import Caller, check_level
from loopwright.models.base import ToolDefinition
from loopwright.tools.base import Permission, ToolArgumentError, ToolContext

__all__ = ["FunctionTool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")

_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MAX_REPORTED_ERRORS = 5
_MAX_MESSAGE_CHARS = 1000
_PREVIEW_CHARS = 60


class FunctionTool(Generic[P, R]):
    """A Python function offered to a model as a tool. Calling it directly calls the function.

    Sync functions run in loopwright's worker pool (:func:`loopwright._threads.run_blocking`) so they
    never block the event loop. With ``inline=True`` a sync function runs on the event loop itself:
    that saves the thread hop (about 100 µs) but the loop cannot time it out or run anything else while
    it runs, so use it only for fast, pure functions. ``inline`` has no effect on async functions.
    """

    __name__: str
    __qualname__: str
    __wrapped__: Callable[P, R]
    _func: Callable[P, R]

    def __init__(
        self,
        func: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        idempotent: bool = False,
        inline: bool = False,
        permission: Permission | None = None,
        groups: Sequence[str] = (),
        level: str = "user",
        untrusted: bool = False,
    ) -> None:
        if isinstance(func, FunctionTool):  # re-decorating: wrap the original function, not the tool
            func = func._func
        tool_name = name if name is not None else getattr(func, "__name__", "")
        if not _NAME_RE.fullmatch(tool_name):
            raise ValueError(
                f"invalid tool name {tool_name!r}: use 1-64 letters, digits, '_' or '-' (pass name=...)"
            )
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout of tool {tool_name!r} must be a positive number of seconds")
        if permission not in (None, "allow", "ask", "deny"):
            raise ValueError(f"permission of tool {tool_name!r} must be 'allow', 'ask' or 'deny'")
        check_level(level, what=f"level of tool {tool_name!r}")
        if isinstance(groups, str):
            groups = (groups,)
        summary, param_docs = parse_docstring(inspect.getdoc(func))
        plan = _plan_arguments(func, tool_name, param_docs)

        self._func = func
        self._target: Callable[..., Any] = func
        self._name = tool_name
        self._description = description if description is not None else summary
        self._timeout = timeout
        self._idempotent = idempotent
        self.permission: Permission | None = permission
        """The tool's own default in the permission policy (rules in AGENT.md or the agent win)."""
        self.groups: tuple[str, ...] = tuple(groups)
        self.level = level
        """The lowest caller level that may see this tool (guest < user < admin < owner)."""
        self.untrusted = untrusted
        """Its results are outside content: the model is told not to follow instructions in them."""
        self._is_async = inspect.iscoroutinefunction(func) or (
            not inspect.isroutine(func) and inspect.iscoroutinefunction(type(func).__call__)
        )
        self._inline = inline
        self._context_param = plan.context_param
        self._caller_param = plan.caller_param
        self._positional_only = plan.positional_only
        self._param_names = tuple(plan.fields)
        adapter = _build_adapter(tool_name, plan.fields)
        self._validate_json = adapter.validator.validate_json
        self._validate_python = adapter.validator.validate_python
        self._parameters = _build_schema(tool_name, adapter, plan.defaults)
        self._definition = ToolDefinition(
            name=tool_name, description=self._description, parameters=self._parameters
        )
        functools.update_wrapper(self, func, updated=())

    # --- the Tool protocol ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def description(self) -> str:
        return self._description

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the arguments (shared and cached: do not mutate)."""
        return self._parameters

    @property
    def timeout(self) -> float | None:
        return self._timeout

    @property
    def idempotent(self) -> bool:
        """Whether running the tool twice with the same arguments is harmless (used on crash recovery)."""
        return self._idempotent

    @property
    def inline(self) -> bool:
        return self._inline

    def definition(self) -> ToolDefinition:
        return self._definition

    def validate(self, arguments: str) -> dict[str, Any]:
        """Parse the model's raw JSON into keyword arguments, or raise :class:`ToolArgumentError`.

        An empty or blank string means "no arguments". Nothing but :class:`ToolArgumentError` escapes.
        """
        try:
            result: dict[str, Any] = self._validate_json(arguments)
            return result
        except ValidationError as exc:
            error = exc
        except Exception as exc:  # pydantic-core only raises ValidationError; this is a guarantee
            raise ToolArgumentError(
                f"invalid arguments for tool {self._name!r}: {type(exc).__name__}"
            ) from exc
        if isinstance(arguments, str) and not arguments.strip():
            try:
                empty: dict[str, Any] = self._validate_python({})
                return empty
            except ValidationError as exc:
                error = exc
        raise ToolArgumentError(self._explain(error)) from error

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """Run the function with arguments from :meth:`validate`; its return value comes back unchanged."""
        kwargs = arguments if self._context_param is None else {**arguments, self._context_param: ctx}
        if self._caller_param is not None:
            kwargs = {**kwargs, self._caller_param: ctx.caller}
        if self._positional_only:
            kwargs = dict(kwargs)
            args = [kwargs.pop(name, default) for name, default in self._positional_only]
            if self._is_async:
                return await self._target(*args, **kwargs)
            if self._inline:
                return self._target(*args, **kwargs)
            return await run_blocking(self._target, *args, **kwargs)
        if self._is_async:
            return await self._target(**kwargs)
        if self._inline:
            return self._target(**kwargs)
        return await run_blocking(self._target, **kwargs)

    # --- plain Python use ----------------------------------------------------------------------

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<FunctionTool {self._name!r}>"

    def _explain(self, error: ValidationError) -> str:
        try:
            return _describe_errors(self._name, self._param_names, error.errors(include_url=False))
        except Exception:  # a message must always come out, whatever the input looked like
            return f"invalid arguments for tool {self._name!r}"


@overload
def tool(func: Callable[P, R], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    idempotent: bool = False,
    inline: bool = False,
    permission: Permission | None = None,
    groups: Sequence[str] = (),
    level: str = "user",
    untrusted: bool = False,
) -> Callable[[Callable[P, R]], FunctionTool[P, R]]: ...


def tool(
    func: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    idempotent: bool = False,
    inline: bool = False,
    permission: Permission | None = None,
    groups: Sequence[str] = (),
    level: str = "user",
    untrusted: bool = False,
) -> FunctionTool[P, R] | Callable[[Callable[P, R]], FunctionTool[P, R]]:
    """Make a sync or async function a :class:`FunctionTool`; use as ``@tool`` or ``@tool(...)``.

    Every parameter needs a type hint (a :class:`TypeError` says which one lacks it), except one of type
    :class:`~loopwright.tools.base.ToolContext`, which the loop fills in and the model never sees.
    ``*args`` and ``**kwargs`` are refused; a parameter of type :class:`~loopwright.Caller` receives
    who the run is for. ``timeout`` overrides the loop's tool timeout for this tool; see
    :class:`FunctionTool` for ``inline``. ``permission``, ``groups``, ``level``, ``idempotent`` and
    ``untrusted`` are the safety traits described in docs/safety.md.
    """

    def decorate(f: Callable[P, R]) -> FunctionTool[P, R]:
        return FunctionTool(
            f,
            name=name,
            description=description,
            timeout=timeout,
            idempotent=idempotent,
            inline=inline,
            permission=permission,
            groups=groups,
            level=level,
            untrusted=untrusted,
        )

    return decorate if func is None else decorate(func)


# --- decoration time -----------------------------------------------------------------------------


class _Plan:
    __slots__ = ("caller_param", "context_param", "defaults", "fields", "positional_only")

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self.defaults: dict[str, Any] = {}
        self.context_param: str | None = None
        self.caller_param: str | None = None
        self.positional_only: list[tuple[str, Any]] = []


def _plan_arguments(func: Callable[..., Any], tool_name: str, docs: dict[str, str]) -> _Plan:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"cannot read the signature of tool {tool_name!r}: {exc}") from exc
    hints = _type_hints(func, tool_name)
    plan = _Plan()
    for param in signature.parameters.values():
        where = f"parameter {param.name!r} of tool {tool_name!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{where}: *args and **kwargs cannot be described to a model; name each argument")
        annotation = hints.get(param.name, param.annotation)
        if annotation is param.empty and param.name in ("self", "cls"):
            raise TypeError(f"{where} has no type hint; to make a method a tool, use tool(instance.method)")
        if annotation is param.empty:
            raise TypeError(f"{where} has no type hint; annotate it (for example `{param.name}: str`)")
        if isinstance(annotation, str):
            raise TypeError(
                f"{where}: cannot resolve the type hint {annotation!r}; define it at module level"
            )
        if param.kind is param.POSITIONAL_ONLY:
            plan.positional_only.append((param.name, param.default))
        if _is_injected(annotation, ToolContext):
            if plan.context_param is not None:
                raise TypeError(f"{where}: only one parameter may receive the ToolContext")
            plan.context_param = param.name
            continue
        if _is_injected(annotation, Caller):
            if plan.caller_param is not None:
                raise TypeError(f"{where}: only one parameter may receive the Caller")
            plan.caller_param = param.name
            continue
        annotation = _with_description(annotation, docs.get(param.name))
        if param.default is param.empty:
            plan.fields[param.name] = annotation
        else:
            plan.fields[param.name] = NotRequired[annotation]
            plan.defaults[param.name] = param.default
    return plan


def _type_hints(func: Callable[..., Any], tool_name: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func, include_extras=True)
    except (NameError, AttributeError, SyntaxError) as exc:
        raise TypeError(
            f"cannot resolve the type hints of tool {tool_name!r}: {exc}; define the types at module level"
        ) from exc
    except TypeError:
        return {}  # not introspectable (e.g. functools.partial): fall back to the signature's hints


def _is_injected(annotation: Any, kind: type) -> bool:
    """Whether a parameter is one the loop fills in (``ToolContext``, ``Caller``, or ``X | None``)."""
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if annotation is kind:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members == [kind]
    return False


def _with_description(annotation: Any, description: str | None) -> Any:
    if not description:
        return annotation
    if typing.get_origin(annotation) is Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, FieldInfo) and meta.description is not None:
                return annotation  # an explicit Field(description=...) wins over the docstring
    return Annotated[annotation, Field(description=description)]


def _build_adapter(tool_name: str, fields: dict[str, Any]) -> TypeAdapter[Any]:
    make_typed_dict: Any = TypedDict  # the functional form, which mypy cannot follow
    arguments = make_typed_dict(f"{tool_name}_arguments", fields)
    # NaN and Infinity are not JSON: a model that sends them gets an error, not a silent inf
    arguments.__pydantic_config__ = ConfigDict(extra="forbid", allow_inf_nan=False)
    try:
        return TypeAdapter(arguments)
    except Exception as exc:
        raise TypeError(f"cannot build an argument schema for tool {tool_name!r}: {exc}") from exc


def _build_schema(tool_name: str, adapter: TypeAdapter[Any], defaults: dict[str, Any]) -> dict[str, Any]:
    try:
        raw = adapter.json_schema()
    except Exception as exc:
        raise TypeError(f"cannot express the arguments of tool {tool_name!r} as JSON schema: {exc}") from exc
    properties: dict[str, Any] = {name: _strip_titles(sub) for name, sub in raw.get("properties", {}).items()}
    for name, default in defaults.items():
        with contextlib.suppress(Exception):  # a default no model could send (a sentinel): leave it out
            properties[name]["default"] = to_jsonable_python(default)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if raw.get("required"):
        schema["required"] = list(raw["required"])
    schema["additionalProperties"] = False
    if raw.get("$defs"):
        schema["$defs"] = {name: _strip_titles(sub) for name, sub in raw["$defs"].items()}
    return schema


_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_ONE = frozenset(
    {"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"}
)


def _strip_titles(node: Any) -> Any:
    """Drop pydantic's ``title`` keys from a schema node, leaving data (defaults, enums) untouched."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_strip_titles(sub) for sub in value]
        elif key in _SCHEMA_ONE:
            out[key] = _strip_titles(value)
        else:
            out[key] = value
    return out


# --- error messages for the model ----------------------------------------------------------------


def _describe_errors(tool_name: str, params: tuple[str, ...], errors: list[Any]) -> str:
    parts = [_describe_error(error, params) for error in errors[:_MAX_REPORTED_ERRORS]]
    if len(errors) > _MAX_REPORTED_ERRORS:
        parts.append(f"and {len(errors) - _MAX_REPORTED_ERRORS} more problems")
    message = f"invalid arguments for tool {tool_name!r}: " + "; ".join(parts)
    if len(message) > _MAX_MESSAGE_CHARS:
        message = message[: _MAX_MESSAGE_CHARS - 3] + "..."
    # Keys the model invented may hold lone surrogates; the message must encode as UTF-8.
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def _describe_error(error: Any, params: tuple[str, ...]) -> str:
    kind, loc = error["type"], error["loc"]
    if kind == "json_invalid":
        detail = error.get("ctx", {}).get("error", error["msg"])
        return f"arguments are not valid JSON ({detail}); send a JSON object"
    if not loc:
        return f"arguments must be a JSON object, not {_json_kind(error['input'])}"
    if len(loc) == 1 and kind == "missing":
        return f"missing required argument {loc[0]!r}"
    if len(loc) == 1 and kind == "extra_forbidden":
        expected = ", ".join(params) if params else "none: this tool takes no arguments"
        return f"unknown argument {loc[0]!r} (expected: {expected})"
    where = _format_loc(loc)
    if kind == "missing":
        return f"{where}: missing required field"
    if kind == "extra_forbidden":
        return f"{where}: unknown field"
    return f"{where}: {error['msg']} (got {_preview(error['input'])})"


def _format_loc(loc: tuple[int | str, ...]) -> str:
    text = str(loc[0])
    for part in loc[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _preview(value: Any) -> str:
    try:
        text = json.dumps(value, default=repr)
    except Exception:
        return "an unprintable value"
    if len(text) > _PREVIEW_CHARS:
        text = text[: _PREVIEW_CHARS - 3] + "..."
    return text


# --- docstrings ----------------------------------------------------------------------------------

_SECTION_RE = re.compile(
    r"\s*(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|Returns?|"
    r"Yields?|Raises|Examples?|Notes?|Attributes|See Also|Warnings?|Todo)\s*:?\s*"
)
_GOOGLE_HEADER_RE = re.compile(
    r"(\s*)(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments)\s*:\s*"
)
_GOOGLE_ENTRY_RE = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(.*)")
_SPHINX_RE = re.compile(r"(\s*):param\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:(.*)")
_NUMPY_ENTRY_RE = re.compile(r"\*{0,2}(\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?")
_UNDERLINE_RE = re.compile(r"\s*-{3,}\s*")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its first paragraph and per-parameter descriptions.

    Understands Google (``Args:``), Sphinx (``:param x:``) and NumPy (``Parameters`` + underline)
    styles; continuation lines are joined with spaces.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for index, line in enumerate(lines):
        if not line.strip() or _starts_section(lines, index):
            break
        summary.append(line.strip())
    params: dict[str, list[str]] = {}
    _numpy_params(lines, params)
    _google_params(lines, params)
    _sphinx_params(lines, params)
    described = {name: " ".join(p for p in parts if p) for name, parts in params.items()}
    return " ".join(summary), {name: text for name, text in described.items() if text}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _starts_section(lines: list[str], index: int) -> bool:
    line = lines[index]
    if line.lstrip().startswith(":") or (_SECTION_RE.fullmatch(line) and line.rstrip().endswith(":")):
        return True
    return index + 1 < len(lines) and _UNDERLINE_RE.fullmatch(lines[index + 1]) is not None


def _google_params(lines: list[str], params: dict[str, list[str]]) -> None:
    for index, line in enumerate(lines):
        header = _GOOGLE_HEADER_RE.fullmatch(line)
        if header is None:
            continue
        base = len(header.group(1))
        entry_indent: int | None = None
        current: list[str] | None = None
        for body in lines[index + 1 :]:
            if not body.strip():
                continue
            indent = _indent(body)
            if indent <= base:
                break
            if entry_indent is None:
                entry_indent = indent
            if indent <= entry_indent:
                entry = _GOOGLE_ENTRY_RE.fullmatch(body.strip())
                current = params.setdefault(entry.group(1), []) if entry else None
                if current is not None and entry is not None:
                    current[:] = [entry.group(2).strip()]
            elif current is not None:
                current.append(body.strip())


def _sphinx_params(lines: list[str], params: dict[str, list[str]]) -> None:
    current: list[str] | None = None
    base = 0
    for line in lines:
        match = _SPHINX_RE.fullmatch(line)
        if match is not None:
            base = len(match.group(1))
            current = params[match.group(2)] = [match.group(3).strip()]
        elif (
            current is not None
            and line.strip()
            and _indent(line) > base
            and not line.lstrip().startswith(":")
        ):
            current.append(line.strip())
        else:
            current = None


def _numpy_params(lines: list[str], params: dict[str, list[str]]) -> None:
    headers = {i for i in range(len(lines) - 1) if _UNDERLINE_RE.fullmatch(lines[i + 1]) and lines[i].strip()}
    for index in headers:
        if lines[index].strip() not in ("Parameters", "Other Parameters"):
            continue
        base = _indent(lines[index])
        current: list[list[str]] = []
        for position in range(index + 2, len(lines)):
            body = lines[position]
            if position in headers:
                break
            if not body.strip():
                continue
            indent = _indent(body)
            if indent < base:
                break
            if indent == base:
                entry = _NUMPY_ENTRY_RE.fullmatch(body.strip())
                names = [n.strip().lstrip("*") for n in entry.group(1).split(",")] if entry else []
                current = [params.setdefault(name, []) for name in names]
                for description in current:
                    description.clear()
            else:
                for description in current:
                    description.append(body.strip())
