"""A layered system prompt: named layers with a priority, tags and an owner, composed in order.

Lower priority comes first. Stable layers (identity, scope, tools, anything a plugin adds that does
not change between runs) form the prefix that providers cache; dynamic ones (summary, memory, the
time) are added per run and go last. A registry may have a parent: its layers are visible to the
child, a child layer of the same name replaces the parent's (or, with ``merge_parent``, follows it),
and a parent chain that would loop is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ContextLayer", "ContextRegistry", "LayerCycleError"]


class LayerCycleError(ValueError):
    """Setting this parent would make a registry its own ancestor."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextLayer:
    name: str
    content: str
    priority: int = 100
    """Lower comes first."""
    tags: tuple[str, ...] = ("system",)
    owner: str = ""
    stable: bool = True
    """The same in every run (part of the cached prefix)."""
    merge_parent: bool = False
    """Add to the parent's layer of the same name instead of replacing it."""
    metadata: dict[str, Any] = field(default_factory=dict)


class ContextRegistry:
    """Named layers, composed by priority; see the module docstring."""

    def __init__(self, layers: Iterable[ContextLayer] = (), *, parent: ContextRegistry | None = None) -> None:
        self._layers: dict[str, ContextLayer] = {}
        self._parent: ContextRegistry | None = None
        self._version = 0
        for layer in layers:
            self.set(layer)
        if parent is not None:
            self.set_parent(parent)

    @property
    def parent(self) -> ContextRegistry | None:
        return self._parent

    def set_parent(self, parent: ContextRegistry | None) -> None:
        node = parent
        while node is not None:
            if node is self:
                raise LayerCycleError("a context registry cannot be its own ancestor")
            node = node._parent
        self._parent = parent
        self._version += 1

    def set(self, layer: ContextLayer) -> None:
        """Add a layer, or replace the one of the same name."""
        if not layer.name:
            raise ValueError("a context layer needs a name")
        self._layers[layer.name] = layer
        self._version += 1

    def remove(self, name: str) -> ContextLayer | None:
        self._version += 1
        return self._layers.pop(name, None)

    @property
    def version(self) -> int:
        """Changes whenever a layer (here or in a parent) is set or removed."""
        return self._version + (self._parent.version if self._parent is not None else 0)

    def get(self, name: str) -> ContextLayer | None:
        return self.resolved().get(name)

    def resolved(self, *, include_parent: bool = True) -> dict[str, ContextLayer]:
        """Every visible layer by name: the parent's, overridden (or merged) by this registry's."""
        layers = dict(self._parent.resolved()) if include_parent and self._parent is not None else {}
        for name, layer in self._layers.items():
            below = layers.get(name)
            if layer.merge_parent and below is not None:
                layer = ContextLayer(
                    name=name,
                    content=f"{below.content}\n\n{layer.content}",
                    priority=layer.priority,
                    tags=layer.tags,
                    owner=layer.owner,
                    stable=layer.stable and below.stable,
                    metadata={**below.metadata, **layer.metadata},
                )
            layers[name] = layer
        return layers

    def layers(self, *, tag: str | None = "system", stable: bool | None = None) -> list[ContextLayer]:
        """Visible layers in composition order (priority, then name), filtered by tag and stability."""
        chosen = [
            layer
            for layer in self.resolved().values()
            if (tag is None or tag in layer.tags)
            and (stable is None or layer.stable == stable)
            and layer.content
        ]
        return sorted(chosen, key=lambda la: (la.priority, la.name))

    def flat(self, *, tag: str | None = "system", stable: bool | None = None, separator: str = "\n\n") -> str:
        """The composed text."""
        return separator.join(layer.content.strip() for layer in self.layers(tag=tag, stable=stable))

    def fork(self) -> ContextRegistry:
        """An independent copy with the same parent."""
        return ContextRegistry(self._layers.values(), parent=self._parent)

    def __len__(self) -> int:
        return len(self.resolved())
