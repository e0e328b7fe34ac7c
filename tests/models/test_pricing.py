"""The price table: shipped data, name matching, both providers' cache conventions, user overrides."""

from __future__ import annotations

import json
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from loopwright.errors import ConfigError
from loopwright.messages import Usage
from loopwright.models.pricing import Price, PriceTable, PriceTableError

SHIPPED: dict[str, Any] = json.loads(
    resources.files("loopwright.models").joinpath("prices.json").read_text(encoding="utf-8")
)


# --- the shipped table -------------------------------------------------------------------------------


def test_shipped_table_validates_and_is_dated() -> None:
    table = PriceTable.default()
    assert table is PriceTable.default()  # loaded once
    assert table.as_of is not None and table.as_of >= date(2025, 1, 1)
    assert "openai" in table.source and "anthropic" in table.source
    assert table.names() == sorted(SHIPPED["models"])


@pytest.mark.parametrize("name", sorted(SHIPPED["models"]))
def test_every_shipped_entry_has_all_four_prices(name: str) -> None:
    entry = SHIPPED["models"][name]
    assert set(entry) == {"input", "output", "cache_read", "cache_write"}
    assert all(isinstance(v, int | float) and v >= 0 for v in entry.values())
    if name != "test":
        assert entry["output"] > 0 and entry["input"] > 0


@pytest.mark.parametrize(
    "name",
    [
        "openai:gpt-4o",
        "openai:gpt-4o-mini",
        "openai:gpt-4.1",
        "openai:gpt-4.1-mini",
        "openai:o3",
        "openai:o4-mini",
        "anthropic:claude-sonnet-4-5",
        "anthropic:claude-opus-4-1",
        "anthropic:claude-haiku-4-5",
        "anthropic:claude-3-5-haiku-latest",
        "test",
    ],
)
def test_well_known_models_are_priced(name: str) -> None:
    assert PriceTable.default().price_for(name) is not None


def test_the_test_model_costs_zero() -> None:
    assert PriceTable.default().cost("test", Usage(input_tokens=10_000, output_tokens=500)) == 0.0


# --- exact costs -------------------------------------------------------------------------------------


def test_openai_cost_without_cache() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=200_000, requests=1)
    # gpt-4o: $2.50 in, $10 out per million
    assert PriceTable.default().cost("openai:gpt-4o", usage) == pytest.approx(2.5 + 2.0)


def test_openai_input_includes_cached_tokens_so_they_are_not_charged_twice() -> None:
    # OpenAI's prompt_tokens (our input_tokens) include the 400 cached tokens.
    usage = Usage(input_tokens=1000, output_tokens=100, cache_read_tokens=400)
    expected = (600 * 2.5 + 400 * 1.25 + 100 * 10.0) / 1e6
    assert PriceTable.default().cost("openai:gpt-4o", usage) == pytest.approx(expected)


def test_anthropic_input_excludes_cache_reads_and_writes() -> None:
    usage = Usage(input_tokens=1000, output_tokens=100, cache_read_tokens=4000, cache_write_tokens=2000)
    # claude-sonnet-4-5: $3 in, $15 out, $0.30 cache read, $3.75 cache write
    expected = (1000 * 3.0 + 100 * 15.0 + 4000 * 0.30 + 2000 * 3.75) / 1e6
    assert PriceTable.default().cost("anthropic:claude-sonnet-4-5", usage) == pytest.approx(expected)


def test_anthropic_cost_without_cache() -> None:
    usage = Usage(input_tokens=2_000_000, output_tokens=1_000_000)
    assert PriceTable.default().cost("anthropic:claude-haiku-4-5", usage) == pytest.approx(2.0 + 5.0)


def test_cached_tokens_beyond_the_input_count_never_make_a_negative_charge() -> None:
    price = Price(input=1.0, output=1.0, cache_read=0.5, input_includes_cache_read=True)
    assert price.cost(Usage(input_tokens=10, cache_read_tokens=30)) == pytest.approx(30 * 0.5 / 1e6)


def test_cache_prices_default_to_the_input_price() -> None:
    price = Price(input=2.0, output=8.0)
    assert (price.cache_read, price.cache_write) == (2.0, 2.0)
    assert not price.input_includes_cache_read


# --- names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("openai:gpt-4o-2024-08-06", "openai:gpt-4o"),
        ("openai:gpt-4o-mini-2024-07-18", "openai:gpt-4o-mini"),
        ("openai:gpt-4.1-nano-2025-04-14", "openai:gpt-4.1-nano"),
        ("openai:o4-mini-2025-04-16", "openai:o4-mini"),
        ("anthropic:claude-sonnet-4-5-20250929", "anthropic:claude-sonnet-4-5"),
        ("anthropic:claude-opus-4-1-20250805", "anthropic:claude-opus-4-1"),
        ("anthropic:claude-opus-4-20250514", "anthropic:claude-opus-4"),
        ("anthropic:claude-3-5-haiku-20241022", "anthropic:claude-3-5-haiku"),
        ("anthropic:claude-3-5-haiku-latest", "anthropic:claude-3-5-haiku"),
        ("openai-responses:gpt-4o", "openai:gpt-4o"),
        ("openai-responses:gpt-4.1-2025-04-14", "openai:gpt-4.1"),
        ("gpt-4o-2024-08-06", "openai:gpt-4o"),  # as the provider reports it, without a prefix
        ("  openai:gpt-4o  ", "openai:gpt-4o"),
    ],
)
def test_snapshots_aliases_and_provider_aliases_match_their_base_entry(name: str, base: str) -> None:
    table = PriceTable.default()
    assert table.price_for(name) == table.price_for(base) is not None


def test_a_listed_snapshot_wins_over_its_base() -> None:
    table = PriceTable.default()
    old = table.price_for("openai:gpt-4o-2024-05-13")
    assert old is not None and old != table.price_for("openai:gpt-4o")
    assert old.input == 5.0


@pytest.mark.parametrize(
    "name",
    [
        "openai:gpt-4.1-turbo",  # a longer name is another model, not a snapshot
        "openai:o3-pro",
        "openai:gpt-4o-audio-preview",
        "openai-compatible:gpt-4o",  # any server: not OpenAI's price
        "mistral:mistral-large-2411",
        "anthropic:claude-unknown-9",
        "llama3:8b",
        "replay:test",
        "",
    ],
)
def test_unknown_models_cost_none_never_zero(name: str) -> None:
    table = PriceTable.default()
    assert table.price_for(name) is None
    assert table.cost(name, Usage(input_tokens=1000, output_tokens=10)) is None


def test_a_bare_name_two_providers_price_differently_is_unknown() -> None:
    table = PriceTable.from_mapping(
        {"models": {"a:shared": {"input": 1, "output": 2}, "b:shared": {"input": 3, "output": 4}}}
    )
    assert table.price_for("shared") is None
    assert table.price_for("a:shared") == Price(input=1, output=2)


# --- overrides ------------------------------------------------------------------------------------


def test_overrides_win_and_leave_the_rest_alone() -> None:
    table = PriceTable.default().with_overrides(
        {"models": {"openai:gpt-4o": {"input": 1.0, "output": 4.0, "cache_read": 0.1, "cache_write": 1.0}}}
    )
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert table.cost("openai:gpt-4o", usage) == pytest.approx(5.0)
    assert table.cost("openai:gpt-4o-2024-11-20", usage) == pytest.approx(5.0)  # snapshots follow
    assert PriceTable.default().cost("openai:gpt-4o", usage) == pytest.approx(12.5)  # default untouched
    assert table.price_for("anthropic:claude-haiku-4-5") == PriceTable.default().price_for(
        "anthropic:claude-haiku-4-5"
    )


def test_overrides_add_models_providers_and_aliases() -> None:
    table = PriceTable.default().with_overrides(
        {
            "providers": {"acme": {"input_includes_cache_read": True}},
            "models": {"acme:rocket": {"input": 1, "output": 2}},
            "aliases": {"acme:rocket-latest": "acme:rocket"},
        }
    )
    price = table.price_for("acme:rocket-latest")
    assert price == Price(input=1, output=2, cache_read=1, cache_write=1, input_includes_cache_read=True)
    assert table.price_for("acme:rocket-20260101") == price


def test_a_provider_override_changes_only_the_fields_it_gives() -> None:
    table = PriceTable.default().with_overrides(
        {"providers": {"openai": {"input_includes_cache_read": False}}}
    )
    price = table.price_for("openai-responses:gpt-4o")  # the alias survives
    assert price is not None and not price.input_includes_cache_read


def test_bad_override_names_the_model_and_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        PriceTable.default().with_overrides(
            {"models": {"openai:gpt-4o": {"input": -1, "output": "ten", "cahce_read": 0.5}}}
        )
    error = info.value
    assert isinstance(error, PriceTableError)
    fields = {p.field for p in error.problems}
    assert fields == {
        "models['openai:gpt-4o'].input",
        "models['openai:gpt-4o'].output",
        "models['openai:gpt-4o'].cahce_read",
    }
    assert "'openai:gpt-4o'" in str(error) and "cahce_read" in str(error)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"models": {"x:y": {"input": 1}}}, "models['x:y'].output"),
        ({"models": {"x:y": 3}}, "models['x:y']"),
        ({"models": {"x:y": {"input": True, "output": 1}}}, "models['x:y'].input"),
        ({"models": {"x:y": {"input": float("nan"), "output": 1}}}, "models['x:y'].input"),
        ({"modles": {}}, "modles"),
        (
            {"providers": {"openai": {"input_includes_cache_read": "yes"}}},
            "providers['openai'].input_includes_cache_read",
        ),
        ({"aliases": {"x:latest": "x:missing"}}, "aliases['x:latest']"),
        ({"as_of": "last tuesday"}, "as_of"),
        ({"currency": "EUR"}, "currency"),
    ],
)
def test_invalid_overrides_are_config_errors(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(PriceTableError) as info:
        PriceTable.default().with_overrides(overrides)
    assert field in {p.field for p in info.value.problems}


def test_from_mapping_is_only_what_it_is_given() -> None:
    table = PriceTable.from_mapping({"models": {"test": {"input": 0, "output": 0}}})
    assert table.names() == ["test"]
    assert table.price_for("openai:gpt-4o") is None


def test_load_lays_a_file_over_the_shipped_prices(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"models": {"openai:o3": {"input": 1, "output": 2}}}))
    table = PriceTable.load(path)
    assert table.price_for("openai:o3") == Price(input=1, output=2, input_includes_cache_read=True)
    assert table.price_for("openai:gpt-4o") == PriceTable.default().price_for("openai:gpt-4o")


def test_load_reports_a_bad_file_with_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(ConfigError, match=r"missing\.json"):
        PriceTable.load(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"models": {\n  "openai:o3": {"input": 1,}\n}}')
    with pytest.raises(PriceTableError, match=r"broken\.json") as info:
        PriceTable.load(broken)
    assert info.value.problems[0].line == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"models": {"openai:o3": {"input": 1, "output": -2}}}))
    with pytest.raises(PriceTableError, match=r"models\['openai:o3'\]\.output"):
        PriceTable.load(bad)
