"""Plugins: packages that add hooks, tools and prompt layers to agents.

A plugin is an object with ``setup(api)`` (or a function of ``api``). Installed packages publish
one under the ``loopwright.plugins`` entry-point group::

    [project.entry-points."loopwright.plugins"]
    audit = "my_package.plugin:AuditPlugin"

An agent loads only the plugins it names (``plugins:`` in AGENT.md, ``Agent(plugins=[...])``):
installing a package never changes what an agent does by itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from loopwright.context.registry import ContextLayer
from loopwright.errors import ConfigError
from loopwright.hooks._bus import Handler, HookBus
from loopwright.tools.base import Tool, Toolset

__all__ = ["ENTRY_POINT_GROUP", "PluginAPI", "available_plugins", "load_plugin"]

ENTRY_POINT_GROUP = "loopwright.plugins"


@dataclass(slots=True)
class PluginAPI:
    """What a plugin's ``setup`` may do to the agent being built."""

    hooks: HookBus
    plugin: str
    tools: list[Tool | Toolset] = field(default_factory=list)
    layers: list[ContextLayer] = field(default_factory=list)

    def on(self, hook: str, handler: Handler) -> Callable[[], None]:
        return self.hooks.on(hook, handler)

    def add_tool(self, tool: Tool | Toolset | Callable[..., Any]) -> None:
        if isinstance(tool, (Tool, Toolset)):
            self.tools.append(tool)
            return
        from loopwright.tools._function import tool as make_tool

        self.tools.append(make_tool(tool))

    def add_layer(self, layer: ContextLayer) -> None:
        self.layers.append(layer)


def available_plugins() -> dict[str, str]:
    """Installed plugins: entry-point name -> ``module:attribute``."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def load_plugin(spec: Any) -> Any:
    """A plugin object from an object, or from the name of an installed entry point."""
    if not isinstance(spec, str):
        return spec
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == spec]
    if not found:
        known = ", ".join(sorted(available_plugins())) or "none installed"
        raise ConfigError(f"unknown plugin {spec!r} (entry-point group {ENTRY_POINT_GROUP!r}: {known})")
    try:
        target = found[0].load()
    except Exception as exc:
        raise ConfigError(f"plugin {spec!r} failed to load: {type(exc).__name__}: {exc}") from exc
    return target() if isinstance(target, type) else target


def setup_plugin(plugin: Any, api: PluginAPI) -> None:
    setup = getattr(plugin, "setup", None)
    if setup is None and callable(plugin):
        setup = plugin
    if setup is None:
        raise ConfigError(f"plugin {api.plugin!r} has no setup(api) method")
    try:
        setup(api)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"plugin {api.plugin!r} failed in setup: {type(exc).__name__}: {exc}") from exc
