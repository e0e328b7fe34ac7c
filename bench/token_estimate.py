"""How close are token estimates to what OpenAI-format providers report?

For every recorded chat-completions request in ``shared/fixtures/provider-recordings/`` that has
messages and a reported ``usage.prompt_tokens``, this compares against the provider's count:

  chars/4   :class:`CharCounter`, four characters per token (today's estimate)
  exact     :class:`BpeCounter`, the model's byte-pair encoding (``loopwright[tokens]``)

each counting the whole request with no anchor (system prompt, tool definitions as OpenAI shows them
to the model, messages), and each again as the *hybrid* estimate the loop uses: the previous
request's reported count plus a count of the messages added since. Then it compares the two counters
on the same texts (every message of every recording, this repository's sources and docs).

Recordings of other OpenAI-compatible servers (Groq, OpenRouter) count with the encoding their
model name implies and are reported separately: their tokenizers are their own.

Run: ``python bench/token_estimate.py``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopwright.context.accounting import (
    BpeCounter,
    CharCounter,
    HybridEstimate,
    TokenCounter,
    encoding_for,
    exact_counting_available,
    tool_definitions_text,
)
from loopwright.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from loopwright.models.base import ToolDefinition

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT.parent / "shared" / "fixtures" / "provider-recordings"


@dataclass(slots=True)
class Request:
    recording: str
    provider: str
    model: str
    system: str
    messages: list[Message]
    tools: list[ToolDefinition]
    prompt_tokens: int


def _reported_usage(response: dict[str, Any]) -> dict[str, Any] | None:
    body = response.get("body_json")
    if isinstance(body, dict) and isinstance(body.get("usage"), dict):
        found: dict[str, Any] = body["usage"]
        return found
    usage = None
    for event in response.get("sse_events") or ():
        for line in event.split("\n"):
            if line.startswith("data:") and '"usage"' in line:
                try:
                    found = json.loads(line[5:]).get("usage")
                except ValueError:
                    continue
                if found:
                    usage = found
    if usage is None and response.get("body_text"):
        try:
            usage = json.loads(response["body_text"]).get("usage")
        except (ValueError, AttributeError):
            return None
    return usage if isinstance(usage, dict) else None


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _convert(wire: list[dict[str, Any]]) -> tuple[str, list[Message]]:
    system: list[str] = []
    out: list[Message] = []
    names: dict[str, str] = {}
    for m in wire:
        role = m["role"]
        if role in ("system", "developer"):
            system.append(_text(m.get("content")))
        elif role == "user":
            out.append(UserMessage(content=_text(m.get("content"))))
        elif role == "assistant":
            calls = tuple(
                ToolCall(
                    id=c["id"],
                    name=c["function"]["name"],
                    arguments=c["function"].get("arguments") or "",
                )
                for c in m.get("tool_calls") or ()
            )
            names.update((c.id, c.name) for c in calls)
            out.append(AssistantMessage(content=_text(m.get("content")), tool_calls=calls))
        elif role == "tool":
            call_id = m["tool_call_id"]
            out.append(
                ToolResultMessage(
                    tool_call_id=call_id, name=names.get(call_id, ""), content=_text(m.get("content"))
                )
            )
    return "\n\n".join(system), out


def _tool(wire: dict[str, Any]) -> ToolDefinition:
    fn = wire.get("function", wire)
    return ToolDefinition(
        name=fn["name"], description=fn.get("description") or "", parameters=fn.get("parameters") or {}
    )


def load_requests() -> list[Request]:
    found = []
    for path in sorted(RECORDINGS.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for interaction in data.get("interactions") or ():
            request = interaction.get("request") or {}
            body = request.get("body_json")
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                continue
            usage = _reported_usage(interaction.get("response") or {})
            if not usage or not usage.get("prompt_tokens"):
                continue
            system, messages = _convert(body["messages"])
            found.append(
                Request(
                    recording=path.stem,
                    provider=str(data.get("provider", "?")).split(" ")[0],
                    model=str(body.get("model", "")),
                    system=system,
                    messages=messages,
                    tools=[_tool(t) for t in body.get("tools") or ()],
                    prompt_tokens=int(usage["prompt_tokens"]),
                )
            )
    return found


def request_estimate(counter: TokenCounter, request: Request) -> int:
    """The whole request, with no anchor: system, tool definitions, messages, the reply's priming."""
    return HybridEstimate(counter).estimate(request.system, request.messages, tools=request.tools)


def _ape(estimate: int, actual: int) -> float:
    return abs(estimate - actual) / actual * 100.0


def main() -> None:
    if not exact_counting_available():
        sys.exit("this benchmark needs the exact tokenizer: pip install 'loopwright[tokens]'")
    requests = load_requests()
    chars = CharCounter()
    exact = {name: BpeCounter(name) for name in ("o200k_base", "cl100k_base")}
    started = time.perf_counter()
    for counter in exact.values():
        counter.load()
    load_s = time.perf_counter() - started

    print(f"{len(requests)} recorded requests with messages and reported prompt tokens")
    print(
        "Whole request (system + messages + tool definitions) and hybrid (previous report + new messages)\n"
    )
    head = f"{'recording':<52}{'model':<15}{'msgs':>5}{'actual':>8}{'chars/4':>9}{'exact':>7}"
    print(head + f"{'hyb c/4':>9}{'hyb ex':>8}")
    rows: dict[str, list[tuple[float, float, float | None, float | None]]] = {}
    previous: Request | None = None
    for req in requests:
        counter = exact[encoding_for(f"openai:{req.model.rsplit('/', 1)[-1]}") or "o200k_base"]
        est_c = request_estimate(chars, req)
        est_x = request_estimate(counter, req)
        hyb_c = hyb_x = None
        if previous is not None and previous.recording == req.recording:
            anchor_index = len(previous.messages) - 1
            values = []
            for c in (chars, counter):
                hybrid = HybridEstimate(c)
                hybrid.record_actual(previous.prompt_tokens, anchor_index)
                values.append(hybrid.estimate(req.system, req.messages))
            hyb_c, hyb_x = values
        previous = req
        group = "openai" if req.provider == "openai" else "other OpenAI-compatible"
        rows.setdefault(group, []).append(
            (
                _ape(est_c, req.prompt_tokens),
                _ape(est_x, req.prompt_tokens),
                None if hyb_c is None else _ape(hyb_c, req.prompt_tokens),
                None if hyb_x is None else _ape(hyb_x, req.prompt_tokens),
            )
        )
        name = req.recording if len(req.recording) <= 50 else req.recording[:47] + "..."
        line = f"{name:<52}{req.model[-14:]:<15}{len(req.messages):>5}{req.prompt_tokens:>8}"
        line += f"{est_c:>9}{est_x:>7}"
        line += f"{'' if hyb_c is None else hyb_c:>9}{'' if hyb_x is None else hyb_x:>8}"
        print(line)

    print("\nMean absolute percentage error against the provider's prompt tokens")
    print(f"{'requests':<28}{'n':>4}{'chars/4':>10}{'exact':>9}{'hybrid c/4':>12}{'hybrid ex':>11}")
    for group, errs in rows.items():
        anchored = [e for e in errs if e[2] is not None]
        line = f"{group:<28}{len(errs):>4}"
        line += f"{statistics.mean(e[0] for e in errs):>9.1f}%{statistics.mean(e[1] for e in errs):>8.1f}%"
        if anchored:
            line += f"{statistics.mean(e[2] or 0.0 for e in anchored):>11.1f}%"
            line += f"{statistics.mean(e[3] or 0.0 for e in anchored):>10.1f}%  (n={len(anchored)})"
        print(line)

    texts = _same_texts(requests)
    o200k = exact["o200k_base"]
    total_chars = sum(len(t) for t in texts)
    counted_exact = [o200k.count_text(t) for t in texts]
    counted_chars = [chars.count_text(t) for t in texts]
    errors = [_ape(c, x) for c, x in zip(counted_chars, counted_exact, strict=True) if x]
    print("\nchars/4 against the exact count (o200k_base) on the same texts")
    print(f"  {len(texts)} texts, {total_chars:,} characters")
    print(
        f"  exact {sum(counted_exact):,} tokens ({total_chars / sum(counted_exact):.2f} chars/token), "
        f"chars/4 {sum(counted_chars):,} ({(sum(counted_chars) / sum(counted_exact) - 1) * 100:+.1f}% in total)"
    )
    print(
        f"  per text: mean absolute error {statistics.mean(errors):.1f}%, median {statistics.median(errors):.1f}%"
    )
    by_kind = _by_kind(texts, counted_exact)
    for kind, (n_chars, n_tokens) in by_kind.items():
        print(f"  {kind:<26}{n_chars / n_tokens:>5.2f} chars/token")
    print(f"\nvocabularies loaded in {load_s * 1000:.0f} ms (both encodings, once per process)")


def _same_texts(requests: list[Request]) -> list[str]:
    texts: list[str] = []
    for req in requests:
        for m in req.messages:
            texts.extend(t for t in (m.content,) if t)
            if type(m) is AssistantMessage:
                texts.extend(c.arguments for c in m.tool_calls if c.arguments)
        if req.tools:
            texts.append(tool_definitions_text(req.tools))
    for path in sorted((ROOT / "src" / "loopwright").rglob("*.py")):
        texts.append(path.read_text(encoding="utf-8"))
    for path in sorted((ROOT / "docs").rglob("*.md")):
        texts.append(path.read_text(encoding="utf-8"))
    return texts


def _by_kind(texts: list[str], counts: list[int]) -> dict[str, tuple[int, int]]:
    kinds: dict[str, tuple[int, int]] = {}
    for text, n in zip(texts, counts, strict=True):
        if text.startswith(('"""', "from ", "import ")):
            kind = "Python source"
        elif text.startswith("#") and "namespace functions" not in text:
            kind = "Markdown docs"
        else:
            kind = "recorded messages and tools"
        c, t = kinds.get(kind, (0, 0))
        kinds[kind] = (c + len(text), t + n)
    return kinds


if __name__ == "__main__":
    main()
