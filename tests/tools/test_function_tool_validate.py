"""FunctionTool.validate: good arguments, each kind of bad argument, and a fuzz that nothing else escapes."""

import enum
import json
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from loopwright.tools._function import FunctionTool, tool
from loopwright.tools.base import ToolArgumentError, ToolContext


class Shape(enum.Enum):
    CIRCLE = "circle"
    SQUARE = "square"


class Point(BaseModel):
    x: int
    y: int = 0


@tool
def add(a: int, b: int, c: int) -> int:
    return a + b + c


@tool
def rich(
    name: str,
    points: list[Point],
    shape: Shape = Shape.CIRCLE,
    mode: Literal["fast", "slow"] = "fast",
    scale: float | None = None,
    tags: dict[str, int] | None = None,
    ctx: ToolContext | None = None,
) -> str:
    return name


@tool
def nothing() -> str:
    return "ok"


def error_of(t: FunctionTool[..., Any], raw: str) -> str:
    with pytest.raises(ToolArgumentError) as info:
        t.validate(raw)
    return str(info.value)


# --- good arguments ------------------------------------------------------------------------------


def test_valid_arguments_become_keyword_arguments() -> None:
    assert add.validate('{"a": 1, "b": 2, "c": 3}') == {"a": 1, "b": 2, "c": 3}


def test_omitted_arguments_are_absent_so_function_defaults_apply() -> None:
    args = rich.validate('{"name": "n", "points": [{"x": 1}]}')
    assert args == {"name": "n", "points": [Point(x=1, y=0)]}


def test_values_are_converted_to_declared_types() -> None:
    args = rich.validate('{"name": "n", "points": [], "shape": "square", "scale": 2, "tags": {"a": 1}}')
    assert args == {"name": "n", "points": [], "shape": Shape.SQUARE, "scale": 2.0, "tags": {"a": 1}}


@pytest.mark.parametrize("raw", ["", "   ", "\n\t "])
def test_blank_means_no_arguments(raw: str) -> None:
    assert nothing.validate(raw) == {}


def test_blank_for_a_tool_with_required_arguments_says_what_is_missing() -> None:
    assert error_of(add, "") == (
        "invalid arguments for tool 'add': missing required argument 'a'; "
        "missing required argument 'b'; missing required argument 'c'"
    )


# --- bad arguments -------------------------------------------------------------------------------


def test_wrong_type_and_missing_argument_in_one_message() -> None:
    assert error_of(add, '{"a": 1, "b": "x"}') == (
        "invalid arguments for tool 'add': b: Input should be a valid integer, unable to parse string "
        "as an integer (got \"x\"); missing required argument 'c'"
    )


def test_unknown_argument_lists_the_expected_ones() -> None:
    assert error_of(add, '{"a": 1, "b": 2, "c": 3, "d": 4}') == (
        "invalid arguments for tool 'add': unknown argument 'd' (expected: a, b, c)"
    )
    assert "this tool takes no arguments" in error_of(nothing, '{"x": 1}')


def test_context_parameter_cannot_be_sent_by_the_model() -> None:
    message = error_of(rich, '{"name": "n", "points": [], "ctx": {}}')
    assert "unknown argument 'ctx'" in message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("[1, 2]", "arguments must be a JSON object, not an array"),
        ("null", "arguments must be a JSON object, not null"),
        ('"text"', "arguments must be a JSON object, not a string"),
        ("12", "arguments must be a JSON object, not a number"),
        ("true", "arguments must be a JSON object, not a boolean"),
    ],
)
def test_json_that_is_not_an_object(raw: str, expected: str) -> None:
    assert error_of(add, raw) == f"invalid arguments for tool 'add': {expected}"


@pytest.mark.parametrize("raw", ['{"a": 1', "{'a': 1}", "a=1", '{"a": 1,}', "\x00"])
def test_invalid_json(raw: str) -> None:
    message = error_of(add, raw)
    assert message.startswith("invalid arguments for tool 'add': arguments are not valid JSON (")
    assert message.endswith("); send a JSON object")


def test_nested_errors_name_the_path() -> None:
    message = error_of(rich, '{"name": "n", "points": [{"x": 1}, {"y": 2}, {"x": "q"}]}')
    assert "points[1].x: missing required field" in message
    assert (
        'points[2].x: Input should be a valid integer, unable to parse string as an integer (got "q")'
        in message
    )


def test_enum_and_literal_errors() -> None:
    message = error_of(rich, '{"name": "n", "points": [], "shape": "hexagon", "mode": "warp"}')
    assert "shape: Input should be 'circle' or 'square' (got \"hexagon\")" in message
    assert "mode: Input should be 'fast' or 'slow' (got \"warp\")" in message


def test_long_values_are_shortened_and_many_errors_are_counted() -> None:
    message = error_of(rich, json.dumps({"name": "x" * 500, "points": [{"x": "y" * 500}] * 8}))
    assert "..." in message
    assert "and 3 more problems" in message
    assert len(message) <= 1000


def test_huge_integer_is_reported_not_crashed_on() -> None:
    message = error_of(rich, '{"name": 1, "points": [{"x": ' + "9" * 6000 + "}]}")
    assert message.startswith("invalid arguments for tool 'rich':")


def test_non_string_input_is_an_argument_error() -> None:
    with pytest.raises(ToolArgumentError):
        add.validate(None)  # type: ignore[arg-type]


# --- fuzz: only ToolArgumentError ever escapes ---------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=8,
)
field_names = st.sampled_from(["name", "points", "shape", "mode", "scale", "tags", "ctx", "x", ""])
shaped_objects = st.dictionaries(field_names, json_values, max_size=6).map(json.dumps)
escapes = st.sampled_from(
    [r"\ud800", r"\udc80", r"\ud83d\ude00", r"\uZZZZ", r"\u12", "\\", r"\x41", r"\0", r"\ud800\u0041"]
)
bad_unicode = st.builds(lambda e, k: '{"' + k + '": "' + e + '", "name": "' + e + '"}', escapes, field_names)
huge_numbers = st.builds(
    lambda digits, exp, key: f'{{"{key}": {"9" * digits}{exp}, "name": "n", "points": []}}',
    st.integers(1, 5000),
    st.sampled_from(["", ".5", "e999", "e-999", "E+400"]),
    field_names,
)
deep_nesting = st.builds(
    lambda depth, opener: '{"points": ' + opener * depth + ("]" if opener == "[" else "}") * depth + "}",
    st.integers(1, 3000),
    st.sampled_from(["[", '{"a":']),
)
payloads = st.one_of(
    st.text(),
    st.binary().map(lambda b: b.decode("latin-1")),
    json_values.map(json.dumps),
    shaped_objects,
    bad_unicode,
    huge_numbers,
    deep_nesting,
)


@settings(max_examples=1000, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads)
def test_fuzzed_payloads_only_raise_tool_argument_error(raw: str) -> None:
    for target in (rich, add, nothing):
        try:
            result = target.validate(raw)
        except ToolArgumentError as exc:
            message = str(exc)
            assert message.startswith(f"invalid arguments for tool {target.name!r}")
            message.encode("utf-8")  # always sendable
            assert len(message) <= 1000
        else:
            assert isinstance(result, dict)
