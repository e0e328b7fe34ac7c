"""Model prices: what a model call cost, in US dollars, from its token :class:`~loopwright.messages.Usage`.

``PriceTable.default()`` is the table shipped in ``prices.json`` beside this module (list prices in USD
per million tokens, dated by its ``as_of`` field); ``with_overrides(mapping)`` and ``load(path)`` lay a
user's prices over it, in the same JSON shape::

    {"providers": {"openai": {"input_includes_cache_read": true, "aliases": ["openai-responses"]}},
     "models": {"openai:gpt-4o": {"input": 2.5, "output": 10, "cache_read": 1.25, "cache_write": 2.5}},
     "aliases": {"anthropic:claude-3-5-haiku-latest": "anthropic:claude-3-5-haiku"}}

An override entry replaces the whole entry of its model. ``cache_read`` and ``cache_write`` may be left
out: each then costs the ``input`` price (no cache discount or surcharge assumed).

**Names.** A model is looked up by its loopwright name (``"openai:gpt-4o"``), in this order:

1. exactly, as given or with its provider alias resolved (``openai-responses:gpt-4o`` is priced as
   ``openai:gpt-4o``), after a name alias from ``"aliases"``;
2. as a dated snapshot of a listed model: the longest listed name that the model's name (after the
   provider prefix) starts with, followed by nothing but a snapshot suffix (``-YYYY-MM-DD``,
   ``-YYYYMMDD``, ``-MMDD`` or ``@YYYYMMDD``). So ``openai:gpt-4o-2024-08-06`` is ``openai:gpt-4o``
   and ``anthropic:claude-sonnet-4-5-20250929`` is ``anthropic:claude-sonnet-4-5``, while an entry
   for the snapshot itself wins (``openai:gpt-4o-2024-05-13`` had its own price) and
   ``openai:gpt-4.1-nano`` is never priced as ``openai:gpt-4.1``;
3. a name without a listed provider prefix, as a provider reports it (``gpt-4o-2024-08-06``), when
   the providers that list it agree on its price.

Anything else is unknown: :meth:`PriceTable.price_for` and :meth:`PriceTable.cost` return ``None``,
never a price of 0 (only the offline ``"test"`` model costs 0).

**Cached tokens.** Loopwright reports ``Usage.input_tokens`` as the provider gives it. OpenAI's
``prompt_tokens`` *include* the cached tokens; Anthropic's ``input_tokens`` *exclude* them (cache
reads and cache writes are counted apart). A provider's ``input_includes_cache_read`` flag says
which: when true, ``cache_read_tokens`` are taken out of ``input_tokens`` before pricing, so they are
never charged twice. Cache writes are always counted apart from ``input_tokens``.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from loopwright.errors import ConfigError, FieldProblem
from loopwright.messages import Usage

__all__ = ["Price", "PriceTable", "PriceTableError"]

_SNAPSHOT = re.compile(r"[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4})")
_PER_MILLION = 1_000_000.0


@dataclass(frozen=True, slots=True, init=False)
class Price:
    """USD per million tokens of each kind; ``cache_read`` and ``cache_write`` default to ``input``.

    ``input_includes_cache_read`` is the provider's convention for ``Usage.input_tokens`` (see the
    module docstring)."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    input_includes_cache_read: bool

    def __init__(
        self,
        *,
        input: float,
        output: float,
        cache_read: float | None = None,
        cache_write: float | None = None,
        input_includes_cache_read: bool = False,
    ) -> None:
        object.__setattr__(self, "input", float(input))
        object.__setattr__(self, "output", float(output))
        object.__setattr__(self, "cache_read", float(input if cache_read is None else cache_read))
        object.__setattr__(self, "cache_write", float(input if cache_write is None else cache_write))
        object.__setattr__(self, "input_includes_cache_read", input_includes_cache_read)

    def cost(self, usage: Usage) -> float:
        """What ``usage`` cost, in USD."""
        uncached = usage.input_tokens
        if self.input_includes_cache_read:
            uncached = max(0, uncached - usage.cache_read_tokens)
        return (
            uncached * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        ) / _PER_MILLION


class PriceTableError(ConfigError):
    """A price table (the shipped one, an override mapping or file) did not validate.

    ``source`` says where it came from; ``problems`` names each bad field, for example
    ``models['openai:gpt-4o'].input``."""

    def __init__(self, source: str, problems: list[FieldProblem]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"invalid price table {source!r}:\n{lines}")


# --- the JSON shape (a trust boundary: users override it) -----------------------------------------

_USD = Annotated[float, Field(ge=0, strict=True, allow_inf_nan=False)]
_ModelName = Annotated[str, Field(pattern=r"^[^\s:]+(:\S+)?$")]
_ProviderName = Annotated[str, Field(pattern=r"^[^\s:]+$")]


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input: _USD
    output: _USD
    cache_read: _USD | None = None
    cache_write: _USD | None = None


class _Provider(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input_includes_cache_read: bool = Field(default=False, strict=True)
    aliases: tuple[_ProviderName, ...] = ()
    """Other provider prefixes priced like this one (``openai-responses`` for ``openai``)."""


_NO_RULES = _Provider()


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    comment: str = ""
    source: str = ""
    as_of: date | None = None
    currency: Literal["USD"] = "USD"
    providers: dict[_ProviderName, _Provider] = {}
    models: dict[_ModelName, _Entry] = {}
    aliases: dict[_ModelName, _ModelName] = {}


def _parse(data: Any, source: str) -> _Document:
    try:
        return _Document.model_validate(data)
    except ValidationError as exc:
        problems = [
            _problem(e["loc"], "should be a JSON object" if e["type"] == "model_type" else e["msg"])
            for e in exc.errors()
        ]
        raise PriceTableError(source, problems) from None


def _problem(loc: tuple[int | str, ...], message: str) -> FieldProblem:
    """``("models", "openai:gpt-4o", "input")`` -> ``models['openai:gpt-4o'].input``."""
    path = str(loc[0]) if loc else "(document)"
    for i, part in enumerate(loc[1:], start=1):
        if i == 1 and loc[0] in ("models", "providers", "aliases"):
            path += f"[{part!r}]"
        elif part == "[key]":
            path += " (the name)"
        elif isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}"
    return FieldProblem(field=path, message=message)


def _merge(base: _Document, over: _Document) -> _Document:
    providers = dict(base.providers)
    for name, provider in over.providers.items():
        old = providers.get(name)
        given = provider.model_dump(exclude_unset=True)
        providers[name] = provider if old is None else old.model_copy(update=given)
    meta = over.model_dump(include={"comment", "source", "as_of"}, exclude_unset=True)
    return base.model_copy(
        update={
            **meta,
            "providers": providers,
            "models": {**base.models, **over.models},
            "aliases": {**base.aliases, **over.aliases},
        }
    )


def _split(name: str) -> tuple[str, str]:
    """``"openai:gpt-4o"`` -> ``("openai", "gpt-4o")``; a name without a provider -> ``("", name)``."""
    provider, colon, model = name.partition(":")
    return (provider, model) if colon else ("", name)


# --- the table -------------------------------------------------------------------------------------


class PriceTable:
    """Prices by model name. Immutable: :meth:`with_overrides` returns a new table.

    Build one with :meth:`default`, :meth:`from_mapping`, :meth:`load` or :meth:`with_overrides`."""

    __slots__ = ("_aliases", "_by_provider", "_canonical", "_document", "_origin")

    def __init__(self, document: _Document, *, origin: str) -> None:
        self._document = document
        self._origin = origin
        self._aliases = dict(document.aliases)
        self._canonical: dict[str, str] = {}
        for name, rules in document.providers.items():
            self._canonical[name] = name
            for alias in rules.aliases:
                self._canonical.setdefault(alias, name)
        self._by_provider: dict[str, dict[str, Price]] = {}
        for name, entry in document.models.items():
            provider, model = _split(name)
            includes = (document.providers.get(provider) or _NO_RULES).input_includes_cache_read
            self._by_provider.setdefault(provider, {})[model] = Price(
                input=entry.input,
                output=entry.output,
                cache_read=entry.cache_read,
                cache_write=entry.cache_write,
                input_includes_cache_read=includes,
            )
        dangling = [
            FieldProblem(field=f"aliases[{alias!r}]", message=f"names {target!r}, which is not in 'models'")
            for alias, target in document.aliases.items()
            if self._exact(target) is None
        ]
        if dangling:
            raise PriceTableError(origin, dangling)

    # --- construction ---------------------------------------------------------------------------

    @classmethod
    def default(cls) -> PriceTable:
        """The shipped table (``prices.json``), loaded once."""
        return _default_table()

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, origin: str = "<mapping>") -> PriceTable:
        """A table of exactly ``data`` (the JSON shape), without the shipped prices."""
        return cls(_parse(data, origin), origin=origin)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, base: PriceTable | None = None) -> PriceTable:
        """``base`` (the shipped table by default) with the overrides in the JSON file at ``path``."""
        where = str(path)
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read price table {where!r}: {exc}") from exc
        except ValueError as exc:
            line = getattr(exc, "lineno", None)
            raise PriceTableError(where, [FieldProblem("(file)", f"not valid JSON: {exc}", line)]) from None
        return (base or cls.default()).with_overrides(data, origin=where)

    def with_overrides(self, overrides: Mapping[str, Any], *, origin: str = "<overrides>") -> PriceTable:
        """A new table: this one with ``overrides`` (the JSON shape) laid over it; the overrides win."""
        return PriceTable(_merge(self._document, _parse(overrides, origin)), origin=origin)

    # --- lookup ---------------------------------------------------------------------------------

    @property
    def as_of(self) -> date | None:
        """The date the prices were taken, if the table says."""
        return self._document.as_of

    @property
    def source(self) -> str:
        """Where the prices come from (the table's ``source`` field)."""
        return self._document.source

    def names(self) -> list[str]:
        """Every listed model name (aliases left out), sorted."""
        return sorted(self._document.models)

    def price_for(self, model_name: str) -> Price | None:
        """The price of ``model_name`` (see the module docstring for how names match), or ``None``."""
        name = model_name.strip()
        provider, model = _split(name)
        candidates = [name]
        canonical = self._canonical.get(provider) if provider else None
        if canonical is not None and canonical != provider:
            candidates.append(f"{canonical}:{model}")
        for candidate in candidates:
            found = self._named(candidate)
            if found is not None:
                return found
        if provider and (canonical is not None or provider in self._by_provider):
            return None  # a listed provider that does not list this model
        # A bare name, as a provider reports it: known when the providers that list it agree.
        prices = {
            price
            for listed in self._by_provider
            if listed and (price := self._named(f"{listed}:{name}")) is not None
        }
        return prices.pop() if len(prices) == 1 else None

    def cost(self, model_name: str, usage: Usage) -> float | None:
        """What ``usage`` cost on ``model_name``, in USD; ``None`` when the model's price is unknown."""
        price = self.price_for(model_name)
        return None if price is None else price.cost(usage)

    def _named(self, name: str) -> Price | None:
        return self._match(self._aliases.get(name, name))

    def _exact(self, name: str) -> Price | None:
        provider, model = _split(name)
        return self._by_provider.get(provider, {}).get(model)

    def _match(self, name: str) -> Price | None:
        provider, model = _split(name)
        table = self._by_provider.get(provider)
        if not table:
            return None
        exact = table.get(model)
        if exact is not None:
            return exact
        best = ""
        for listed in table:
            if (
                len(listed) > len(best)
                and model.startswith(listed)
                and _SNAPSHOT.fullmatch(model, len(listed)) is not None
            ):
                best = listed
        return table[best] if best else None

    def __repr__(self) -> str:
        count = len(self._document.models)
        return f"PriceTable({count} models, as_of={self.as_of}, origin={self._origin!r})"


@functools.cache
def _default_table() -> PriceTable:
    text = resources.files("loopwright.models").joinpath("prices.json").read_text(encoding="utf-8")
    return PriceTable(_parse(json.loads(text), "prices.json"), origin="prices.json")
