"""The ``loopwright`` command: the Typer application and its global options."""

from __future__ import annotations

from typing import Annotated

import typer

from loopwright import __version__
from loopwright.cli._chat import chat
from loopwright.cli._demo import demo
from loopwright.cli._init import init
from loopwright.cli._personas import personas_app
from loopwright.cli._run import run
from loopwright.cli._serve import serve
from loopwright.cli._sessions import sessions_app
from loopwright.cli._term import Terminal, install_log_handler
from loopwright.cli._usage import usage
from loopwright.cli._users import users_app

__all__ = ["app", "main"]

app = typer.Typer(
    name="loopwright",
    help="Run agents defined by a workspace folder (AGENT.md), and inspect their sessions.",
    epilog="Start with: loopwright demo, then loopwright init my-agent.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"loopwright {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", metavar="", help="Show the library's log messages on standard error."
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", metavar="", help="Show the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Run agents defined by a workspace folder (AGENT.md), and inspect their sessions."""
    install_log_handler(verbose)
    ctx.obj = Terminal.create()


app.command()(init)
app.command()(run)
app.command()(chat)
app.add_typer(sessions_app)
app.add_typer(users_app)
app.add_typer(personas_app)
app.command()(usage)
app.command()(demo)
app.command()(serve)


def main() -> None:
    """The console script."""
    app(prog_name="loopwright")
