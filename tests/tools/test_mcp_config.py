"""The AGENT.md ``mcp:`` section and MCPServer: valid settings parse, bad ones name the bad key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopwright.errors import ConfigError
from loopwright.tools.mcp import MCPServer, MCPToolset, mcp_toolsets, parse_mcp_config


def test_stdio_and_http_servers_parse_in_order() -> None:
    servers = parse_mcp_config(
        {
            "time": {"command": ["mcp-server-time", "--local-timezone", "UTC"], "timeout": 20},
            "git": {"command": "mcp-server-git --repository '/a b'", "env": {"GIT_X": 1}, "cwd": "repo"},
            "docs": {"url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${T}"}},
            "py": {"command": "python", "args": ["-m", "server", 3], "startup_timeout": 5},
        }
    )
    assert servers == [
        MCPServer(name="time", command=("mcp-server-time", "--local-timezone", "UTC"), timeout=20.0),
        MCPServer(
            name="git", command=("mcp-server-git", "--repository", "/a b"), env={"GIT_X": "1"}, cwd="repo"
        ),
        MCPServer(name="docs", url="https://example.test/mcp", headers={"Authorization": "Bearer ${T}"}),
        MCPServer(name="py", command=("python", "-m", "server", "3"), startup_timeout=5.0),
    ]
    assert [s.transport for s in servers] == ["stdio", "stdio", "http", "stdio"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "mcp: must be a mapping of server names to settings, got a list"),
        (
            {"t": "mcp-server-time"},
            "mcp.t: must be a mapping with 'command' or 'url', got the string 'mcp-server-time'",
        ),
        ({"t": {}}, "mcp.t: needs 'command' (stdio) or 'url' (streamable HTTP)"),
        ({"t": {"command": "x", "url": "http://h/mcp"}}, "mcp.t: give either 'command' (stdio) or 'url'"),
        ({"t": {"command": ["x", 1]}}, "mcp.t.command: must be a list of strings or a string, got a list"),
        ({"t": {"command": 5}}, "mcp.t.command: must be a list of strings or a string, got the number 5"),
        ({"t": {"command": ""}}, "mcp.t.command: is empty"),
        ({"t": {"command": []}}, "mcp.t.command: is empty"),
        ({"t": {"command": "x 'unclosed"}}, 'mcp.t.command: cannot split "x \'unclosed"'),
        (
            {"t": {"command": "x", "comand": "y"}},
            "mcp.t: unknown key 'comand' (known keys: args, command, cwd,",
        ),
        ({"t": {"url": 5}}, "mcp.t.url: must be a string, got the number 5"),
        ({"t": {"url": "ftp://h/x"}}, "mcp.t: MCP server 't': url must be an http:// or https:// URL"),
        ({"t": {"url": "http://h/x", "env": {"A": "b"}}}, "mcp.t.env: only a stdio server"),
        ({"t": {"command": "x", "headers": {"A": "b"}}}, "mcp.t.headers: only an HTTP server"),
        (
            {"t": {"command": "x", "env": ["A"]}},
            "mcp.t.env: must be a mapping of names to strings, got a list",
        ),
        ({"t": {"command": "x", "env": {"A": None}}}, "mcp.t.env.A: must be a string, got nothing"),
        ({"t": {"command": "x", "env": {"1A": "v"}}}, "'1A' is not a valid environment variable name"),
        ({"t": {"command": "x", "timeout": 0}}, "mcp.t.timeout: must be a number of seconds above 0"),
        ({"t": {"command": "x", "timeout": "10"}}, "mcp.t.timeout: must be a number of seconds above 0"),
        ({"t": {"command": "x", "startup_timeout": True}}, "mcp.t.startup_timeout: must be a number"),
        ({"t": {"command": "x", "args": "-v"}}, "mcp.t.args: must be a list of strings"),
        ({"t": {"args": ["-v"]}}, "mcp.t.args: 'args' needs a 'command'"),
        ({"t": {"command": "x", "cwd": 3}}, "mcp.t.cwd: must be a folder path, got the number 3"),
        ({"bad name": {"command": "x"}}, "invalid MCP server name 'bad name'"),
        ({"a__b": {"command": "x"}}, "invalid MCP server name 'a__b'"),
        ({1: {"command": "x"}}, "mcp: server names must be strings, got 1"),
    ],
)
def test_bad_settings_name_the_bad_key(data: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_mcp_config(data)
    assert message in str(info.value)


def test_mcp_server_checks_its_own_fields() -> None:
    with pytest.raises(ConfigError, match="needs either a command"):
        MCPServer(name="x")
    with pytest.raises(ConfigError, match="command must be a list of strings"):
        MCPServer(name="x", command="mcp-server-time")
    with pytest.raises(ConfigError, match="timeout must be a number of seconds above 0"):
        MCPServer(name="x", command=["a"], timeout=-1)
    with pytest.raises(ConfigError, match="command contains a NUL byte"):
        MCPServer(name="x", command=["a\x00b"])


def test_the_environment_is_minimal_and_references_are_filled_in_at_launch() -> None:
    server = MCPServer(name="s", command=["x"], env={"TOKEN": "${MY_TOKEN}", "MODE": "a-${MODE}-b"})
    environ = {
        "PATH": "/bin",
        "HOME": "/h",
        "OPENAI_API_KEY": "sk-1",
        "MY_TOKEN": "t-2",
        "MODE": "m",
        "OTHER": "o",
    }
    assert server.launch_env(environ) == {"PATH": "/bin", "HOME": "/h", "TOKEN": "t-2", "MODE": "a-m-b"}
    with pytest.raises(ConfigError, match=r"env.TOKEN refers to \$\{MY_TOKEN\}, which is not set"):
        server.launch_env({"PATH": "/bin"})
    web = MCPServer(name="w", url="http://127.0.0.1:1/mcp", headers={"Authorization": "Bearer ${T}"})
    assert web.resolved_headers({"T": "abc"}) == {"Authorization": "Bearer abc"}


def test_secrets_in_settings_stay_out_of_the_repr() -> None:
    server = MCPServer(name="s", command=["x"], env={"TOKEN": "literal-secret"})
    web = MCPServer(name="w", url="http://h/mcp", headers={"Authorization": "Bearer literal-secret"})
    assert "literal-secret" not in repr(server) + repr(web) + repr(MCPToolset(server))


def test_mcp_toolsets_resolve_relative_folders_against_the_workspace(tmp_path: Path) -> None:
    servers = [
        MCPServer(name="a", command=["x"]),
        MCPServer(name="b", command=["x"], cwd="sub"),
        MCPServer(name="c", command=["x"], cwd="/abs"),
        MCPServer(name="d", url="http://h/mcp"),
    ]
    toolsets = mcp_toolsets(servers, workspace=tmp_path)
    assert [t.server.cwd for t in toolsets] == [str(tmp_path), str(tmp_path / "sub"), "/abs", None]
    assert [t.name for t in toolsets] == ["a", "b", "c", "d"]
    assert [t.server.cwd for t in mcp_toolsets(servers)] == [None, "sub", "/abs", None]


_junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=12), _junk, max_size=4))
def test_any_input_parses_or_raises_config_error(data: dict[str, Any]) -> None:
    try:
        servers = parse_mcp_config(data)
    except ConfigError as exc:
        assert str(exc)
    else:
        assert [s.name for s in servers] == list(data)


def test_the_mcp_package_exports_exactly_its_public_names() -> None:
    import loopwright.tools.mcp as package

    assert sorted(package.__all__) == sorted(
        n
        for n, v in vars(package).items()
        if not n.startswith("_") and getattr(v, "__module__", "").startswith("loopwright")
    )
    assert set(package.__all__) == {
        "MCPServer",
        "MCPServerError",
        "MCPTool",
        "MCPToolError",
        "MCPToolset",
        "mcp_toolsets",
        "parse_mcp_config",
        "render_result",
    }
