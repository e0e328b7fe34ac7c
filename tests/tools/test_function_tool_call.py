"""FunctionTool.call: where functions run, what they receive and what comes back."""

import asyncio
import threading
from typing import Any

import pytest

from loopwright.tools._function import tool
from loopwright.tools.base import ToolContext


async def test_sync_tool_runs_off_the_event_loop_thread(ctx: ToolContext) -> None:
    @tool
    def where() -> int:
        return threading.get_ident()

    assert await where.call(where.validate(""), ctx) != threading.get_ident()


async def test_inline_sync_tool_runs_on_the_event_loop_thread(ctx: ToolContext) -> None:
    @tool(inline=True)
    def where() -> int:
        return threading.get_ident()

    assert where.inline is True
    assert await where.call(where.validate(""), ctx) == threading.get_ident()


async def test_async_tool_is_awaited_on_the_loop(ctx: ToolContext) -> None:
    @tool
    async def add(a: int, b: int) -> tuple[int, int]:
        await asyncio.sleep(0)  # a real suspension point, not a wait for state
        return a + b, threading.get_ident()

    assert await add.call(add.validate('{"a": 2, "b": 3}'), ctx) == (5, threading.get_ident())


async def test_context_is_injected_where_declared(ctx: ToolContext) -> None:
    seen: list[ToolContext] = []

    @tool
    def sync_tool(x: int, context: ToolContext) -> int:
        seen.append(context)
        return x

    @tool
    async def async_tool(c: ToolContext, x: int) -> int:
        seen.append(c)
        return x

    assert await sync_tool.call(sync_tool.validate('{"x": 1}'), ctx) == 1
    assert await async_tool.call(async_tool.validate('{"x": 2}'), ctx) == 2
    assert seen == [ctx, ctx]


async def test_validated_arguments_are_not_mutated_by_injection(ctx: ToolContext) -> None:
    @tool
    def f(x: int, c: ToolContext) -> int:
        return x

    args = f.validate('{"x": 1}')
    await f.call(args, ctx)
    assert args == {"x": 1}


async def test_function_defaults_apply_to_omitted_arguments(ctx: ToolContext) -> None:
    @tool
    def f(a: int, items: list[int] | None = None, label: str = "L") -> tuple[int, Any, str]:
        return a, items, label

    assert await f.call(f.validate('{"a": 1}'), ctx) == (1, None, "L")


async def test_positional_only_parameters(ctx: ToolContext) -> None:
    @tool
    def f(a: int, b: int = 10, /, c: int = 100) -> int:
        return a + b + c

    assert await f.call(f.validate('{"a": 1}'), ctx) == 111
    assert await f.call(f.validate('{"a": 1, "b": 2, "c": 3}'), ctx) == 6

    @tool
    async def g(c: ToolContext, a: int, /) -> str:
        return f"{c.call_id}:{a}"

    assert await g.call(g.validate('{"a": 7}'), ctx) == "call-1:7"


async def test_return_value_is_unchanged(ctx: ToolContext) -> None:
    marker = object()

    @tool
    def f() -> object:
        return marker

    assert await f.call(f.validate(""), ctx) is marker


async def test_exceptions_propagate(ctx: ToolContext) -> None:
    @tool
    def broken() -> None:
        raise LookupError("nope")

    @tool
    async def broken_async() -> None:
        raise LookupError("nope async")

    with pytest.raises(LookupError, match="nope"):
        await broken.call({}, ctx)
    with pytest.raises(LookupError, match="nope async"):
        await broken_async.call({}, ctx)


async def test_direct_call_still_works_for_sync_and_async() -> None:
    @tool
    def double(x: int) -> int:
        return 2 * x

    @tool
    async def triple(x: int) -> int:
        return 3 * x

    assert double(4) == 8
    assert await triple(4) == 12


async def test_many_concurrent_sync_calls_all_complete(ctx: ToolContext) -> None:
    @tool
    def square(x: int) -> int:
        return x * x

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(square.call(square.validate(f'{{"x": {i}}}'), ctx)) for i in range(100)]
    assert [t.result() for t in tasks] == [i * i for i in range(100)]


class Counter:
    def __init__(self) -> None:
        self.total = 0

    def add(self, n: int) -> int:
        self.total += n
        return self.total

    async def __call__(self, n: int) -> int:
        return -n


async def test_bound_methods_and_async_callable_objects(ctx: ToolContext) -> None:
    counter = Counter()
    add = tool(counter.add)
    assert add.parameters["properties"] == {"n": {"type": "integer"}}
    assert await add.call(add.validate('{"n": 5}'), ctx) == 5
    negate = tool(name="negate")(counter)
    assert await negate.call(negate.validate('{"n": 5}'), ctx) == -5


def test_decorating_an_unbound_method_explains_what_to_do() -> None:
    with pytest.raises(TypeError, match=r"to make a method a tool, use tool\(instance.method\)"):
        tool(Counter.add)


async def test_redecorating_a_tool_wraps_the_original_function(ctx: ToolContext) -> None:
    @tool(name="first", timeout=1.0)
    async def f(x: int) -> int:
        return x + 1

    renamed = tool(name="second")(f)
    assert (renamed.name, renamed.timeout) == ("second", None)
    assert await renamed.call(renamed.validate('{"x": 1}'), ctx) == 2
