"""Hooks and plugins: see :mod:`loopwright.hooks._bus` and docs/hooks.md."""

from loopwright.hooks._bus import HOOKS, HookBus, HookName, StopRun
from loopwright.hooks._events import (
    AgentEnd,
    AgentStart,
    CompactionHook,
    GatewayHook,
    MessageHook,
    ModelCallHook,
    SessionHook,
    ToolCallHook,
    ToolResultHook,
)
from loopwright.hooks._plugins import ENTRY_POINT_GROUP, PluginAPI, available_plugins, load_plugin

__all__ = [
    "ENTRY_POINT_GROUP",
    "HOOKS",
    "AgentEnd",
    "AgentStart",
    "CompactionHook",
    "GatewayHook",
    "HookBus",
    "HookName",
    "MessageHook",
    "ModelCallHook",
    "PluginAPI",
    "SessionHook",
    "StopRun",
    "ToolCallHook",
    "ToolResultHook",
    "available_plugins",
    "load_plugin",
]
