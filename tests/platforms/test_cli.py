"""The admin command line: users, personas and usage, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopwright.messages import Usage
from loopwright.models.base import ModelResponse
from loopwright.platforms import PlatformService
from loopwright.sql import Database
from loopwright.testing import ScriptedModel
from tests.cli.helpers import invoke
from tests.platforms.helpers import message
from tests.sql.dbfixtures import BACKENDS, database_url_for_cli


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from database_url_for_cli(request.param, tmp_path)


def seed(url: str) -> str:
    """One message from discord:ada; returns her user id."""

    async def main() -> str:
        async with Database(url) as db:
            await db.migrate()
            model = ScriptedModel(
                [ModelResponse(content="hi", usage=Usage(input_tokens=90, output_tokens=10, requests=1))],
                name="scripted",
            )
            reply = await PlatformService(db, model=model).handle(
                message(platform_user_id="ada", platform_username="Ada")
            )
            return reply.user_id

    return asyncio.run(main())


def test_users_are_listed_shown_and_changed(url: str) -> None:
    user_id = seed(url)
    listed = invoke(["users", "list", "--db", url, "--json"])
    assert listed.exit_code == 0, listed.stderr
    [user] = json.loads(listed.stdout)
    assert (user["id"], user["permissionLevel"], user["tokenBudgetMonthly"], user["tokensUsedThisMonth"]) == (
        user_id,
        "guest",
        5000,
        100,
    )
    table = invoke(["users", "list", "--db", url])
    assert user_id in table.stdout and "100 / 5,000" in table.stdout and "discord:ada" in table.stdout

    shown = invoke(["users", "show", "discord:ada", "--db", url])
    assert shown.exit_code == 0, shown.stderr
    assert "level      guest" in shown.stdout and "model      scripted: 1 calls, 100 tokens" in shown.stdout

    assert invoke(["users", "set-permission", "discord:ada", "admin", "--db", url]).exit_code == 0
    assert invoke(["users", "set-budget", user_id, "unlimited", "--db", url]).exit_code == 0
    changed = json.loads(invoke(["users", "show", user_id, "--db", url, "--json"]).stdout)
    assert (changed["permissionLevel"], changed["tokenBudgetMonthly"]) == ("admin", None)
    assert invoke(["users", "set-budget", user_id, "20,000", "--db", url]).exit_code == 0
    assert (
        json.loads(invoke(["users", "show", user_id, "--db", url, "--json"]).stdout)["tokenBudgetMonthly"]
        == 20000
    )

    linked = invoke(["users", "link", "discord:ada", "slack:U7", "--db", url])
    assert linked.exit_code == 0 and "linked slack:U7" in linked.stdout
    assert json.loads(invoke(["users", "show", "slack:U7", "--db", url, "--json"]).stdout)["id"] == user_id


def test_user_mistakes_get_clear_errors(url: str) -> None:
    seed(url)
    bad_level = invoke(["users", "set-permission", "discord:ada", "root", "--db", url])
    assert bad_level.exit_code == 2 and "unknown permission level 'root'" in bad_level.stderr
    bad_budget = invoke(["users", "set-budget", "discord:ada", "lots", "--db", url])
    assert bad_budget.exit_code == 2 and "budget 'lots' is not a number of tokens" in bad_budget.stderr
    missing = invoke(["users", "show", "discord:nobody", "--db", url])
    assert missing.exit_code == 2 and "user 'discord:nobody' not found" in missing.stderr


def test_personas_are_created_listed_and_edited(url: str, tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("You are the guild's helper.\nBe brief.", encoding="utf-8")
    created = invoke(
        [
            "personas",
            "create",
            "house",
            "--default",
            "--system",
            "Be kind.",
            "--modules",
            "search, math",
            "--db",
            url,
        ]
    )
    assert created.exit_code == 0, created.stderr
    assert "created persona house (default)" in created.stdout
    guild = invoke(
        ["personas", "create", "guild", "--platform", "discord", "--server", "42", "--system-file", str(prompt),
         "--model", "test", "--max-tokens", "300", "--db", url]
    )  # fmt: skip
    assert guild.exit_code == 0 and "(server discord:42)" in guild.stdout
    clash = invoke(["personas", "create", "again", "--default", "--db", url])
    assert clash.exit_code == 2 and "there is already a default persona" in clash.stderr

    edited = invoke(
        ["personas", "edit", "house", "--clear", "modules", "--system", "Be very kind.", "--db", url]
    )
    assert edited.exit_code == 0, edited.stderr
    bad_clear = invoke(["personas", "edit", "house", "--clear", "colour", "--db", url])
    assert bad_clear.exit_code == 2 and "cannot clear colour" in bad_clear.stderr

    personas = {p["name"]: p for p in json.loads(invoke(["personas", "list", "--db", url, "--json"]).stdout)}
    assert (
        personas["house"]["allowedModules"] is None and personas["house"]["systemPrompt"] == "Be very kind."
    )
    assert personas["guild"]["systemPrompt"].startswith("You are the guild's helper.")
    assert (personas["guild"]["defaultModel"], personas["guild"]["maxTokensPerRequest"]) == ("test", 300)
    table = invoke(["personas", "list", "--db", url])
    assert "server discord:42" in table.stdout and "Be very kind." in table.stdout


def test_usage_is_reported_by_user_model_and_month(url: str) -> None:
    user_id = seed(url)
    by_user = json.loads(invoke(["usage", "--db", url, "--json"]).stdout)
    assert [(r["key"], r["label"], r["calls"], r["totalTokens"]) for r in by_user] == [
        (user_id, "Ada", 1, 100)
    ]
    by_model = invoke(["usage", "--by", "model", "--db", url])
    assert "scripted" in by_model.stdout and "unknown" in by_model.stdout  # no price for 'scripted'
    by_month = json.loads(
        invoke(["usage", "--by", "month", "--user", "discord:ada", "--db", url, "--json"]).stdout
    )
    assert len(by_month) == 1 and by_month[0]["inputTokens"] == 90
    wrong = invoke(["usage", "--by", "colour", "--db", url])
    assert wrong.exit_code == 2 and "cannot group usage by 'colour'" in wrong.stderr


def test_the_embedded_database_lives_in_the_workspace(tmp_path: Path) -> None:
    listed = invoke(["users", "list", "-w", str(tmp_path)])
    assert listed.exit_code == 0, listed.stderr
    assert "No users yet" in listed.stdout
    assert (tmp_path / "loopwright.db").is_file()
    missing = invoke(["users", "list", "-w", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "does not exist" in missing.stderr


def test_an_unreachable_database_is_named_without_its_password() -> None:
    result = invoke(["users", "list", "--db", "postgresql://admin:hunter2@127.0.0.1:9/none"])
    assert result.exit_code != 0
    assert (
        "cannot open or migrate database 'postgresql+asyncpg://admin:***@127.0.0.1:9/none'" in result.stderr
    )
    assert "hunter2" not in result.stderr + result.stdout
