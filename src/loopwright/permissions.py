"""The permission policy: whether a tool call runs (``allow``), waits for a person (``ask``) or is
refused (``deny``).

Rules map a key to a decision. A key is a tool name (``exec``), a glob (``mcp_*``, ``git__*``) or a
group (``group:fs``, ``group:mcp:time``). For a call, the most specific rule that matches wins:

1. a rule naming the tool exactly;
2. the matching glob with the most literal characters (``git__commit*`` beats ``git__*`` beats ``*``);
3. a rule naming one of the tool's groups (``deny`` over ``ask`` over ``allow`` when several do);
4. the tool's own default (``@tool(permission="ask")``; the ``exec`` tool asks);
5. the policy's ``default`` (``allow``).

Rules come from ``permissions:`` in AGENT.md and from ``Agent(permissions=...)`` (which win key by
key). Nothing a model or a tool result says can change them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loopwright.tools.base import Permission, ToolTraits

__all__ = ["PermissionPolicy", "PolicyDecision"]

_DECISIONS: tuple[Permission, ...] = ("allow", "ask", "deny")
_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    permission: Permission
    rule: str
    """What decided it: ``"rule 'exec'"``, ``"tool default"``, ``"policy default"``."""


class PermissionPolicy:
    """Rules by name, glob and group; see the module docstring for how a call is decided."""

    def __init__(self, rules: Mapping[str, str] | None = None, *, default: str = "allow") -> None:
        self.default: Permission = _check(default, "default")
        self.rules: dict[str, Permission] = {}
        for key, value in (rules or {}).items():
            if not isinstance(key, str) or not key.strip():
                raise ValueError(f"permission rule keys must be non-empty strings, not {key!r}")
            self.rules[key.strip()] = _check(value, key)
        self._exact = {k: v for k, v in self.rules.items() if not k.startswith("group:") and not _is_glob(k)}
        globs = [(k, v) for k, v in self.rules.items() if not k.startswith("group:") and _is_glob(k)]
        self._globs = sorted(globs, key=lambda kv: -_literal_chars(kv[0]))
        self._groups = {k[len("group:") :]: v for k, v in self.rules.items() if k.startswith("group:")}

    @classmethod
    def merged(cls, *layers: Mapping[str, Any] | None, default: str | None = None) -> PermissionPolicy:
        """One policy from several rule maps, later ones winning key by key. The key ``default`` sets
        the policy default; ``"*"`` is a glob rule, which outranks groups and tools' own defaults."""
        rules: dict[str, str] = {}
        for layer in layers:
            rules.update(layer or {})
        chosen = default or rules.pop("default", None) or "allow"
        return cls(rules, default=chosen)

    def decide(self, name: str, traits: ToolTraits) -> PolicyDecision:
        exact = self._exact.get(name)
        if exact is not None:
            return PolicyDecision(exact, f"rule {name!r}")
        for pattern, value in self._globs:
            if fnmatch.fnmatchcase(name, pattern):
                return PolicyDecision(value, f"rule {pattern!r}")
        hits = [(g, self._groups[g]) for g in traits.groups if g in self._groups]
        if hits:
            group, value = max(hits, key=lambda gv: _STRICTNESS[gv[1]])
            return PolicyDecision(value, f"rule 'group:{group}'")
        if traits.permission is not None:
            return PolicyDecision(traits.permission, "the tool's own default")
        return PolicyDecision(self.default, "the policy default")

    def to_dict(self) -> dict[str, str]:
        return {**self.rules, "default": self.default}

    def __repr__(self) -> str:
        return f"PermissionPolicy({self.rules!r}, default={self.default!r})"


def _check(value: Any, key: str) -> Permission:
    if value not in _DECISIONS:
        raise ValueError(f"permission for {key!r} must be allow, ask or deny, not {value!r}")
    return value  # type: ignore[no-any-return]


def _is_glob(key: str) -> bool:
    return any(ch in key for ch in "*?[")


def _literal_chars(pattern: str) -> int:
    return sum(1 for ch in pattern if ch not in "*?[]")
