"""The layered system prompt: priorities, parents, cycle detection, stable prefix first."""

from __future__ import annotations

import pytest

from loopwright import Agent, ContextLayer, ContextRegistry
from loopwright.context import LayerCycleError
from loopwright.testing import ScriptedModel


def test_layers_compose_by_priority_and_filter_by_tag() -> None:
    reg = ContextRegistry(
        [
            ContextLayer(name="b", content="second", priority=20),
            ContextLayer(name="a", content="first", priority=10),
            ContextLayer(name="note", content="not for the system prompt", priority=5, tags=("notes",)),
        ]
    )
    assert reg.flat() == "first\n\nsecond"
    assert reg.flat(tag="notes") == "not for the system prompt"
    assert [la.name for la in reg.layers(tag=None)] == ["note", "a", "b"]


def test_children_override_or_merge_parent_layers() -> None:
    parent = ContextRegistry([ContextLayer(name="rules", content="Be kind.", priority=10)])
    child = ContextRegistry([ContextLayer(name="rules", content="Be brief.", priority=10)], parent=parent)
    assert child.flat() == "Be brief."
    merged = ContextRegistry(
        [ContextLayer(name="rules", content="Be brief.", priority=10, merge_parent=True)], parent=parent
    )
    assert merged.flat() == "Be kind.\n\nBe brief."
    parent.set(ContextLayer(name="extra", content="From the parent.", priority=5))
    assert child.flat() == "From the parent.\n\nBe brief."  # parent changes show in the child


def test_cycles_are_refused() -> None:
    a = ContextRegistry()
    b = ContextRegistry(parent=a)
    c = ContextRegistry(parent=b)
    with pytest.raises(LayerCycleError):
        a.set_parent(c)
    with pytest.raises(LayerCycleError):
        a.set_parent(a)


def test_version_changes_with_any_layer_in_the_chain() -> None:
    parent = ContextRegistry()
    child = ContextRegistry(parent=parent)
    before = child.version
    parent.set(ContextLayer(name="x", content="y"))
    assert child.version != before


async def test_agent_layers_reach_the_model_stable_first() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model, system="You are Ada.")
    agent.context.set(
        ContextLayer(name="house-style", content="Answer in British English.", priority=40, owner="plugin")
    )
    await agent.run("hi")
    system = model.requests[0].system
    assert (
        system.index("You are Ada.")
        < system.index("Answer in British English.")
        < system.index("Current date")
    )
    assert model.requests[0].stable_system == "You are Ada.\n\nAnswer in British English."
    assert system.startswith(model.requests[0].stable_system)
    agent.context.remove("house-style")
    await agent.run("again")
    assert "British" not in model.requests[1].system
