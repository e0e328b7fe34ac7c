"""LoopConfig defaults and precedence: override > environment > AGENT.md frontmatter > default."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwright import Agent, ConfigError, LoopConfig


def test_defaults_are_the_specifications() -> None:
    c = LoopConfig()
    assert (c.context_window, c.reserve_floor, c.flush_threshold) == (128_000, 4_000, 8_000)
    assert (c.max_tool_iterations, c.execution_timeout, c.tool_timeout) == (10, 600.0, 30.0)
    assert (c.queue_timeout, c.max_queue_depth, c.lock_timeout) == (30.0, 10, 900.0)
    assert (c.max_retries, c.retry_backoff) == (3, 1.0)
    assert c.max_message_bytes == 256 * 1024
    assert c.max_tool_result_chars == 8_000


def test_precedence_override_env_frontmatter_default() -> None:
    front = {"maxToolIterations": 4, "tool_timeout": 5, "max_retries": 1}
    env = {"LOOPWRIGHT_TOOL_TIMEOUT": "7", "LOOPWRIGHT_MAX_RETRIES": "2"}
    c = LoopConfig.resolve(overrides={"max_retries": 9}, environ=env, frontmatter=front)
    assert c.max_tool_iterations == 4  # frontmatter beats the default
    assert c.tool_timeout == 7.0  # environment beats frontmatter
    assert c.max_retries == 9  # override beats environment
    assert c.queue_timeout == 30.0  # untouched default


def test_invalid_values_name_the_field() -> None:
    with pytest.raises(ConfigError, match="max_tool_iterations"):
        LoopConfig.resolve(environ={"LOOPWRIGHT_MAX_TOOL_ITERATIONS": "zero"})
    with pytest.raises(ConfigError, match="tool_timeout"):
        LoopConfig.resolve(overrides={"tool_timeout": -1})
    with pytest.raises(ConfigError, match="no_such_setting"):
        LoopConfig.resolve(overrides={"no_such_setting": 1})


def test_agent_reads_its_workspace_with_the_same_precedence(tmp_path: Path) -> None:
    (tmp_path / "AGENT.md").write_text(
        "---\nname: helper\nmodel: test\nmax_tool_iterations: 4\ntool_timeout: 5\ntools: [current_time]\n---\n"
        "You are the helper.\n"
    )
    agent = Agent(workspace=tmp_path, environ={"LOOPWRIGHT_TOOL_TIMEOUT": "6"}, config={"queue_timeout": 1})
    assert agent.name == "helper"
    assert agent.system == "You are the helper."
    assert list(agent.tools) == ["current_time"]
    assert (agent.config.max_tool_iterations, agent.config.tool_timeout, agent.config.queue_timeout) == (
        4,
        6.0,
        1.0,
    )
    assert agent.model.name == "test"


def test_model_precedence(tmp_path: Path) -> None:
    (tmp_path / "AGENT.md").write_text("---\nmodel: openai:from-frontmatter\n---\nHi\n")
    assert Agent(workspace=tmp_path).model.name == "openai:from-frontmatter"
    env = {"LOOPWRIGHT_MODEL": "openai:from-env"}
    assert Agent(workspace=tmp_path, environ=env).model.name == "openai:from-env"
    assert Agent("test", workspace=tmp_path, environ=env).model.name == "test"


def test_a_lock_lease_must_outlive_a_run() -> None:
    with pytest.raises(ConfigError, match=r"lock_timeout .* must be longer than execution_timeout"):
        LoopConfig.resolve(overrides={"execution_timeout": 1000, "lock_timeout": 900})


def test_workspace_agents_lock_across_processes(tmp_path: Path) -> None:
    from loopwright.lanes import FileSessionLocks, LocalSessionLocks

    assert isinstance(Agent(workspace=tmp_path)._locks, FileSessionLocks)
    assert isinstance(Agent()._locks, LocalSessionLocks)
