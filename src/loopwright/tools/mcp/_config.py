"""How to reach one MCP server, and the ``mcp:`` section of AGENT.md that lists them.

::

    mcp:
      time:
        command: [mcp-server-time, --local-timezone, UTC]
      git:
        command: mcp-server-git --repository .
        env: {GIT_AUTHOR_NAME: agent}
        timeout: 30
      docs:
        url: http://127.0.0.1:8000/mcp
        headers: {Authorization: "Bearer ${DOCS_TOKEN}"}

A stdio server never inherits the agent's environment: it gets ``PATH``, ``HOME``, the locale and the
temporary folder, plus what its ``env`` names. ``${NAME}`` in an ``env`` or ``headers`` value is read
from the agent's environment when the server starts, so a secret is handed over only where the
configuration asks for it, and never sits in the configuration itself (nor in a ``repr``).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from loopwright.errors import ConfigError

__all__ = ["MCPServer", "parse_mcp_config"]

_SERVER_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,31}")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REFERENCE_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KNOWN_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "timeout", "startup_timeout"})
_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME")


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPServer:
    """One MCP server: a program to run over stdio (``command``) or an endpoint (``url``, streamable HTTP).

    ``timeout`` caps each tool call and ``startup_timeout`` the launch and handshake, in seconds. The
    server's tools are offered as ``<name>__<tool>``, so ``name`` is 1-32 letters, digits and ``-``.
    """

    name: str
    command: Sequence[str] | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout: float = 60.0
    startup_timeout: float = 30.0

    def __post_init__(self) -> None:
        where = f"MCP server {self.name!r}"
        if not isinstance(self.name, str) or not _SERVER_NAME_RE.fullmatch(self.name):
            raise ConfigError(
                f"invalid MCP server name {self.name!r}: use 1-32 letters, digits or '-', starting with "
                "a letter or digit (its tools are named '<server>__<tool>')"
            )
        if (self.command is None) == (self.url is None):
            raise ConfigError(f"{where} needs either a command (stdio) or a url (streamable HTTP), not both")
        if self.command is not None:
            if isinstance(self.command, str) or not all(isinstance(p, str) for p in self.command):
                raise ConfigError(f"{where}: command must be a list of strings")
            command = tuple(self.command)
            if not command or not command[0].strip():
                raise ConfigError(f"{where}: command is empty")
            if any("\x00" in part for part in command):
                raise ConfigError(f"{where}: command contains a NUL byte")
            object.__setattr__(self, "command", command)
        if self.url is not None:
            parts = urlsplit(self.url) if isinstance(self.url, str) else None
            if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
                raise ConfigError(f"{where}: url must be an http:// or https:// URL, got {self.url!r}")
        for label, mapping, name_re in (("env", self.env, _ENV_NAME_RE), ("headers", self.headers, None)):
            if not isinstance(mapping, Mapping):
                raise ConfigError(f"{where}: {label} must be a mapping of names to strings")
            for key, value in mapping.items():
                if not isinstance(key, str) or not isinstance(value, str):
                    raise ConfigError(f"{where}: {label} must map strings to strings ({key!r} does not)")
                if name_re is not None and not name_re.fullmatch(key):
                    raise ConfigError(f"{where}: {key!r} is not a valid environment variable name")
            object.__setattr__(self, label, dict(mapping))
        if self.cwd is not None and not isinstance(self.cwd, str):
            raise ConfigError(f"{where}: cwd must be a string")
        for label in ("timeout", "startup_timeout"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 86_400:
                raise ConfigError(f"{where}: {label} must be a number of seconds above 0, got {value!r}")

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    def launch_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The whole environment of a stdio server: a minimal base plus ``env`` with ``${NAME}`` filled in."""
        source = os.environ if environ is None else environ
        env = {key: source[key] for key in _BASE_ENV if key in source}
        env.update({key: self._expand("env", key, value, source) for key, value in self.env.items()})
        return env

    def resolved_headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The HTTP headers with ``${NAME}`` filled in from the environment."""
        source = os.environ if environ is None else environ
        return {key: self._expand("headers", key, value, source) for key, value in self.headers.items()}

    def _expand(self, label: str, key: str, value: str, environ: Mapping[str, str]) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise ConfigError(
                    f"MCP server {self.name!r}: {label}.{key} refers to ${{{name}}}, which is not set"
                )
            return environ[name]

        return _REFERENCE_RE.sub(replace, value)


def parse_mcp_config(data: Mapping[str, Any]) -> list[MCPServer]:
    """The servers of an AGENT.md ``mcp:`` mapping (server name -> settings), in order.

    ``command`` is a list of strings or one string split like a shell would (no shell runs it);
    ``args`` is appended to it. Raises :class:`~loopwright.errors.ConfigError` naming the bad key.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"mcp: must be a mapping of server names to settings, got {_kind(data)}")
    servers: list[MCPServer] = []
    for name, settings in data.items():
        where = f"mcp.{name}"
        if not isinstance(name, str):
            raise ConfigError(f"mcp: server names must be strings, got {name!r}")
        if not isinstance(settings, Mapping):
            raise ConfigError(f"{where}: must be a mapping with 'command' or 'url', got {_kind(settings)}")
        unknown = sorted(str(key) for key in settings if key not in _KNOWN_KEYS)
        if unknown:
            raise ConfigError(
                f"{where}: unknown key {unknown[0]!r} (known keys: {', '.join(sorted(_KNOWN_KEYS))})"
            )
        command = _command(where, settings.get("command"), settings.get("args"))
        url = settings.get("url")
        if url is not None and not isinstance(url, str):
            raise ConfigError(f"{where}.url: must be a string, got {_kind(url)}")
        if command is not None and url is not None:
            raise ConfigError(f"{where}: give either 'command' (stdio) or 'url' (streamable HTTP), not both")
        if command is None and url is None:
            raise ConfigError(f"{where}: needs 'command' (stdio) or 'url' (streamable HTTP)")
        if command is None and "env" in settings:
            raise ConfigError(f"{where}.env: only a stdio server (one with 'command') has an environment")
        if url is None and "headers" in settings:
            raise ConfigError(f"{where}.headers: only an HTTP server (one with 'url') takes headers")
        kwargs: dict[str, Any] = {
            "name": name,
            "command": command,
            "url": url,
            "env": _string_map(f"{where}.env", settings.get("env", {})),
            "headers": _string_map(f"{where}.headers", settings.get("headers", {})),
        }
        cwd = settings.get("cwd")
        if cwd is not None:
            if not isinstance(cwd, str) or not cwd:
                raise ConfigError(f"{where}.cwd: must be a folder path, got {_kind(cwd)}")
            kwargs["cwd"] = cwd
        for key in ("timeout", "startup_timeout"):
            if key in settings:
                kwargs[key] = _seconds(f"{where}.{key}", settings[key])
        try:
            servers.append(MCPServer(**kwargs))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return servers


def _command(where: str, command: Any, args: Any) -> tuple[str, ...] | None:
    if command is None:
        if args is not None:
            raise ConfigError(f"{where}.args: 'args' needs a 'command'")
        return None
    if isinstance(command, str):
        try:
            parts = shlex.split(command)
        except ValueError as exc:
            raise ConfigError(f"{where}.command: cannot split {command!r}: {exc}") from None
    elif isinstance(command, list) and all(isinstance(p, str) for p in command):
        parts = list(command)
    else:
        raise ConfigError(f"{where}.command: must be a list of strings or a string, got {_kind(command)}")
    if not parts or not parts[0].strip():
        raise ConfigError(f"{where}.command: is empty")
    if args is not None:
        if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
            raise ConfigError(f"{where}.args: must be a list of strings, got {_kind(args)}")
        parts.extend(str(a) for a in args)
    return tuple(parts)


def _string_map(where: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be a mapping of names to strings, got {_kind(value)}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise ConfigError(f"{where}: names must be strings, got {key!r}")
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ConfigError(f"{where}.{key}: must be a string, got {_kind(item)}")
        out[key] = str(item)
    return out


def _seconds(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 86_400:
        raise ConfigError(f"{where}: must be a number of seconds above 0 (at most a day), got {value!r}")
    return float(value)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:60]!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__
