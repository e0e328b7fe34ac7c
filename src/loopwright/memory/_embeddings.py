"""Optional embeddings for hybrid memory search: the :class:`Embedder` contract and an OpenAI client.

Keyword search (SQLite FTS5, BM25) needs no model. With an embedder, :class:`~loopwright.memory.MemoryIndex`
also ranks chunks by cosine similarity and fuses both rankings with reciprocal-rank fusion
(:func:`reciprocal_rank_fusion`), so a note can be found by meaning as well as by its words. Vectors are
cached in the index's SQLite file, keyed by the embedder's :attr:`Embedder.name` and a hash of the text,
so each chunk is embedded once per model.
"""

from __future__ import annotations

import array
import math
import os
from collections.abc import Hashable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar, runtime_checkable

from loopwright.errors import ConfigError, ModelError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "Embedder",
    "OpenAICompatibleEmbedder",
    "pack_vector",
    "reciprocal_rank_fusion",
    "unit_vector",
    "unpack_vector",
]

K = TypeVar("K", bound=Hashable)

RRF_K = 60
"""The constant of reciprocal-rank fusion: a hit at rank r (from 1) scores 1 / (RRF_K + r) per ranking."""

_PROVIDER = "openai-compatible"
_PLACEHOLDER_KEY = "not-needed"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors (one per text, in order, all of one length)."""

    @property
    def name(self) -> str:
        """Identifies the model (and its settings): vectors of different names are never compared."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class OpenAICompatibleEmbedder:
    """Embeddings from OpenAI or any server speaking its ``/embeddings`` API (Ollama, vLLM, llama.cpp, ...).

    Uses the official SDK's ``client.embeddings.create`` with ``encoding_format="float"``, at most
    ``batch_size`` texts per request, retrying transient failures ``max_retries`` times. Without
    ``api_key`` the SDK reads ``OPENAI_API_KEY``; a local ``base_url`` with no key anywhere sends a
    placeholder. Failures raise :class:`~loopwright.errors.ModelError`. Close it with :meth:`aclose`
    (or ``async with``).
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str = "text-embedding-3-small",
        api_key: str | None = None,
        *,
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: AsyncOpenAI | None = None,
    ) -> None:
        import openai  # imported here: keyword search must not pay for the SDK

        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        if client is None:
            local = bool(base_url or os.environ.get("OPENAI_BASE_URL"))
            if api_key is None and local and not os.environ.get("OPENAI_API_KEY"):
                api_key = _PLACEHOLDER_KEY
            try:
                client = openai.AsyncOpenAI(
                    api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
                )
            except openai.OpenAIError as exc:
                raise ConfigError(f"cannot set up embedding model {model!r}: {exc}") from exc
        self.client = client

    @property
    def name(self) -> str:
        return self.model if self.dimensions is None else f"{self.model}@{self.dimensions}"

    def __repr__(self) -> str:
        return f"OpenAICompatibleEmbedder({self.model!r}, base_url={str(self.client.base_url)!r})"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(await self._embed_batch(list(texts[start : start + self.batch_size])))
        return vectors

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        import openai

        options: dict[str, Any] = {} if self.dimensions is None else {"dimensions": self.dimensions}
        try:
            response = await self.client.embeddings.create(
                model=self.model, input=texts, encoding_format="float", **options
            )
        except openai.APIStatusError as exc:
            raise ModelError(
                exc.message, provider=_PROVIDER, model=self.model, status=exc.status_code
            ) from exc
        except openai.OpenAIError as exc:
            raise ModelError(str(exc), provider=_PROVIDER, model=self.model) from exc
        items = sorted(response.data, key=lambda item: item.index)
        if len(items) != len(texts):
            message = f"asked for {len(texts)} embeddings, got {len(items)}"
            raise ModelError(message, provider=_PROVIDER, model=self.model)
        return [list(item.embedding) for item in items]

    async def aclose(self) -> None:
        """Close the HTTP client (its connection pool)."""
        await self.client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


# --- vector helpers ------------------------------------------------------------------------------


def unit_vector(vector: Sequence[float]) -> list[float] | None:
    """``vector`` scaled to length 1 (cosine similarity becomes a dot product); ``None`` if it is zero."""
    try:
        norm = math.sqrt(math.fsum(x * x for x in vector))
    except (TypeError, OverflowError):
        return None
    if not norm or not math.isfinite(norm):
        return None
    return [x / norm for x in vector]


def pack_vector(vector: Sequence[float]) -> bytes:
    """float32 bytes, for the SQLite cache."""
    return array.array("f", vector).tobytes()


def unpack_vector(data: bytes) -> array.array[float]:
    vector = array.array("f")
    vector.frombytes(data)
    return vector


def reciprocal_rank_fusion(*rankings: Sequence[K], k: int = RRF_K) -> dict[K, float]:
    """Each item's fused score: the sum over rankings (best first) of ``1 / (k + rank)``, rank from 1."""
    scores: dict[K, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores
