"""Run reports for people: the figures, then each step with its usage, latency and tool calls."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from loopwright.cli import _format
from loopwright.cli._render import reason_style
from loopwright.cli._term import text
from loopwright.report import RunReport, StepReport, ToolCallReport

__all__ = ["print_report"]

_ERROR_CHARS = 160


def print_report(console: Console, report: RunReport, *, heading: bool = True) -> None:
    """Print ``report``: a heading line (run id, reason, model), its totals, then one block per step."""
    if heading:
        line = Text.assemble(("run ", "bold"), text(report.id, "bold"), " · ")
        line.append(report.reason, reason_style(report.reason))
        line.append_text(text(f" · model {report.model}", "dim"))
        if report.started_at:
            line.append(f" · {_format.epoch_time(report.started_at)}", "dim")
        console.print(line, soft_wrap=True)
    totals = (
        _format.count(report.step_count, "step"),
        _format.count(report.tool_call_count, "tool call"),
        _format.tokens(report.total_usage),
        f"{_format.duration(report.total_ms)} (model {_format.duration(report.total_llm_time_ms)}, "
        f"tools {_format.duration(report.total_tool_time_ms)})",
    )
    console.print(Text("  " + " · ".join(totals)), soft_wrap=True)
    width = max((len(call.tool_name) for step in report.steps for call in step.tool_calls), default=0)
    for step in report.steps:
        _print_step(console, step, width)
    if report.error:
        console.print(Text.assemble("  ", ("error: ", "red"), text(report.error)), soft_wrap=True)


def _print_step(console: Console, step: StepReport, width: int) -> None:
    usage = step.usage
    line = Text(f"  step {step.index} ", style="bold")
    figures = [
        step.type.replace("_", " "),
        f"model {_format.duration(step.llm_latency_ms)}",
        f"{usage.input_tokens:,} in / {usage.output_tokens:,} out",
    ]
    if step.finish_reason:
        figures.append(step.finish_reason)
    line.append_text(text(" · ".join(figures), "dim"))
    console.print(line, soft_wrap=True)
    for call in step.tool_calls:
        console.print(_call_line(call, width), soft_wrap=True)


def _call_line(call: ToolCallReport, width: int) -> Text:
    failed = call.error is not None
    line = Text("    ")
    if call.skipped:
        line.append("- ", "yellow")
    else:
        line.append("✗ " if failed else "✓ ", "red" if failed else "green")
    line.append_text(text(f"{call.tool_name:<{width}}", "cyan"))
    line.append(f"  {_format.duration(call.latency_ms):>8}", "dim")
    if call.skipped:
        line.append("  skipped", "yellow")
    if call.error is not None:
        line.append_text(text(f"  {_format.shorten(call.error, _ERROR_CHARS)}", "red"))
    else:
        line.append(f"  {_format.size(call.result_size_bytes):>7}", "dim")
    line.append_text(text(f"  {_format.arguments(call.arguments, 60)}", "dim"))
    return line
