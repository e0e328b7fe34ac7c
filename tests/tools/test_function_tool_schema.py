"""@tool: JSON schema from type hints, descriptions from docstrings, and decoration-time errors."""

import dataclasses
import enum
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from loopwright.models.base import ToolDefinition
from loopwright.tools._function import FunctionTool, parse_docstring, tool
from loopwright.tools.base import Tool, ToolContext


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(BaseModel):
    """A point."""

    x: int
    y: int = 0


@dataclasses.dataclass
class Box:
    width: float
    label: str = "box"


class Span(TypedDict):
    start: int
    end: int


class NotASchemaType:
    pass


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    schema.update(extra)
    return schema


# --- one test per supported type ---------------------------------------------------------------


def test_scalars() -> None:
    @tool
    def f(s: str, i: int, x: float, b: bool) -> None: ...

    assert f.parameters == obj(
        {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
        },
        ["s", "i", "x", "b"],
    )


def test_defaults_are_included_and_make_arguments_optional() -> None:
    @tool
    def f(s: str = "hi", i: int = 3, flag: bool = False, tags: tuple[str, ...] = ("a",)) -> None: ...

    assert f.parameters == obj(
        {
            "s": {"default": "hi", "type": "string"},
            "i": {"default": 3, "type": "integer"},
            "flag": {"default": False, "type": "boolean"},
            "tags": {"default": ["a"], "items": {"type": "string"}, "type": "array"},
        }
    )


def test_default_a_model_cannot_send_is_left_out_of_the_schema() -> None:
    sentinel = object()

    @tool
    def f(x: Any = sentinel) -> None: ...

    assert f.parameters == obj({"x": {}})


def test_list_and_dict() -> None:
    @tool
    def f(names: list[str], counts: dict[str, int]) -> None: ...

    assert f.parameters == obj(
        {
            "names": {"items": {"type": "string"}, "type": "array"},
            "counts": {"additionalProperties": {"type": "integer"}, "type": "object"},
        },
        ["names", "counts"],
    )


def test_optional() -> None:
    @tool
    def f(a: Optional[int], b: str | None = None) -> None:  # noqa: UP045 - both spellings on purpose
        ...

    assert f.parameters == obj(
        {
            "a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "b": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        ["a"],
    )


def test_literal() -> None:
    @tool
    def f(mode: Literal["fast", "slow"] = "fast") -> None: ...

    assert f.parameters == obj({"mode": {"default": "fast", "enum": ["fast", "slow"], "type": "string"}})


def test_enum() -> None:
    @tool
    def f(color: Color) -> None: ...

    assert f.parameters == obj(
        {"color": {"$ref": "#/$defs/Color"}},
        ["color"],
        **{"$defs": {"Color": {"enum": ["red", "green"], "type": "string"}}},
    )


def test_nested_model_keeps_defs_without_titles() -> None:
    @tool
    def f(p: Point, more: list[Point]) -> None: ...

    assert f.parameters == obj(
        {"p": {"$ref": "#/$defs/Point"}, "more": {"items": {"$ref": "#/$defs/Point"}, "type": "array"}},
        ["p", "more"],
        **{
            "$defs": {
                "Point": {
                    "description": "A point.",
                    "properties": {"x": {"type": "integer"}, "y": {"default": 0, "type": "integer"}},
                    "required": ["x"],
                    "type": "object",
                }
            }
        },
    )


def test_dataclass_and_typeddict() -> None:
    @tool
    def f(box: Box, span: Span) -> None: ...

    assert f.parameters == obj(
        {"box": {"$ref": "#/$defs/Box"}, "span": {"$ref": "#/$defs/Span"}},
        ["box", "span"],
        **{
            "$defs": {
                "Box": {
                    "additionalProperties": False,
                    "properties": {
                        "width": {"type": "number"},
                        "label": {"default": "box", "type": "string"},
                    },
                    "required": ["width"],
                    "type": "object",
                },
                "Span": {
                    "additionalProperties": False,
                    "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
                    "required": ["start", "end"],
                    "type": "object",
                },
            }
        },
    )


def test_annotated_field_description_and_constraints() -> None:
    @tool
    def f(n: Annotated[int, Field(description="How many.", ge=1, le=10)] = 1) -> None:
        """Do it.

        Args:
            n: The docstring loses to an explicit Field description.
        """

    assert f.parameters == obj(
        {"n": {"default": 1, "description": "How many.", "maximum": 10, "minimum": 1, "type": "integer"}}
    )


def test_property_called_title_is_kept() -> None:
    @tool
    def f(title: str, json: int, schema: bool, model_config: str, _private: int) -> None: ...

    assert list(f.parameters["properties"]) == ["title", "json", "schema", "model_config", "_private"]
    assert f.parameters["properties"]["title"] == {"type": "string"}


def test_no_parameters() -> None:
    @tool
    def f() -> None:
        """Nothing to say."""

    assert f.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    assert f.definition() == ToolDefinition(name="f", description="Nothing to say.", parameters=f.parameters)


# --- ToolContext ---------------------------------------------------------------------------------


def context_first(ctx: ToolContext, a: int) -> None: ...


def context_last(a: int, ctx: ToolContext) -> None: ...


@pytest.mark.parametrize("func", [context_first, context_last])
def test_tool_context_is_excluded_from_schema(func: Any) -> None:
    assert tool(func).parameters == obj({"a": {"type": "integer"}}, ["a"])


def test_optional_tool_context_is_excluded_too() -> None:
    @tool
    def f(a: int, context: ToolContext | None = None) -> None: ...

    assert f.parameters == obj({"a": {"type": "integer"}}, ["a"])


# --- docstrings ----------------------------------------------------------------------------------


def test_google_docstring() -> None:
    @tool
    def f(a: int, b: str = "x") -> None:
        """Add things together,
        carefully.

        More detail that the model does not need.

        Args:
            a: The first
                thing.
            b (str): The second thing.

        Returns:
            Nothing.
        """

    assert f.description == "Add things together, carefully."
    assert f.parameters["properties"] == {
        "a": {"description": "The first thing.", "type": "integer"},
        "b": {"default": "x", "description": "The second thing.", "type": "string"},
    }


def test_sphinx_docstring() -> None:
    @tool
    def f(path: str, depth: int) -> None:
        """List a folder.

        :param path: Where to look,
            relative to the root.
        :param int depth: How deep.
        :returns: the listing
        """

    assert f.description == "List a folder."
    assert f.parameters["properties"]["path"]["description"] == "Where to look, relative to the root."
    assert f.parameters["properties"]["depth"]["description"] == "How deep."


def test_numpy_docstring() -> None:
    summary, params = parse_docstring(
        """Compute.

        Parameters
        ----------
        x, y : int
            Coordinates
            in pixels.
        scale : float
            Zoom.

        Returns
        -------
        int
            The result.
        """
    )
    assert summary == "Compute."
    assert params == {"x": "Coordinates in pixels.", "y": "Coordinates in pixels.", "scale": "Zoom."}


def test_summary_stops_at_a_section_without_blank_line() -> None:
    assert parse_docstring("Do a thing.\nArgs:\n    a: An a.\n") == ("Do a thing.", {"a": "An a."})


def test_no_docstring_and_overrides() -> None:
    @tool(name="renamed", description="Told by hand.")
    def f(a: int) -> None: ...

    assert (f.name, f.description) == ("renamed", "Told by hand.")
    assert tool(lambda_free).description == ""


def lambda_free(a: int) -> int:
    return a


# --- the rest of the Tool protocol ---------------------------------------------------------------


def test_function_tool_satisfies_the_tool_protocol() -> None:
    @tool(timeout=2.5, idempotent=True)
    def f(a: int) -> int:
        """Double it."""
        return 2 * a

    assert isinstance(f, Tool)
    assert isinstance(f, FunctionTool)
    assert f.timeout == 2.5
    assert f.idempotent is True
    assert f.definition() is f.definition()
    assert f.definition() == ToolDefinition(name="f", description="Double it.", parameters=f.parameters)
    assert f(21) == 42  # still callable like the original
    assert f.__name__ == "f"
    assert f.__doc__ == "Double it."
    assert repr(f) == "<FunctionTool 'f'>"


def test_defaults_for_timeout_and_idempotent() -> None:
    @tool
    def f() -> None: ...

    assert f.timeout is None
    assert f.idempotent is False
    assert f.inline is False


# --- decoration errors ---------------------------------------------------------------------------


def untyped(a, b: int) -> None:  # type: ignore[no-untyped-def]
    ...


def star_args(*args: int) -> None: ...


def star_kwargs(**kwargs: int) -> None: ...


def two_contexts(a: ToolContext, b: ToolContext) -> None: ...


def unresolvable(a: "NoSuchType") -> None:  # type: ignore[name-defined]  # noqa: F821
    ...


def unsupported(a: NotASchemaType) -> None: ...


@pytest.mark.parametrize(
    ("func", "message"),
    [
        (untyped, "parameter 'a' of tool 'untyped' has no type hint"),
        (star_args, "*args and **kwargs"),
        (star_kwargs, "*args and **kwargs"),
        (two_contexts, "only one parameter may receive the ToolContext"),
        (unresolvable, "cannot resolve the type hints of tool 'unresolvable'"),
        (unsupported, "cannot build an argument schema for tool 'unsupported'"),
    ],
)
def test_decoration_type_errors(func: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message.replace("*", r"\*")):
        tool(func)


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dots.not.allowed"])
def test_invalid_names(name: str) -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        tool(name=name)(lambda_free)


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_invalid_timeout(timeout: float) -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        tool(timeout=timeout)(lambda_free)
