"""The CLI edge shared by every command: where output goes and how errors end a command."""

from __future__ import annotations

import functools

import typer
from rich.console import Console
from rich.markup import escape

from tfhelm.errors import TfhelmError, exit_code

out = Console()  # results (manifests, JSON, export lines) go to stdout, so they can be piped
err = Console(stderr=True)  # progress, notes and errors


def cli_errors(fn):
    """Turn our typed errors into one red line; usage errors exit 2, others 1."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TfhelmError as e:
            err.print(f"[red]error:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
            raise typer.Exit(exit_code(e)) from None
    return wrapper
