"""The CLI edge shared by every command: where output goes and how errors end a command.

Every failure ends as one red line on stderr and an exit code from the table in
tfhelm/errors.py; no traceback reaches a user (`TFHELM_DEBUG=1` shows it)."""

from __future__ import annotations

import functools
import os
import re
import sys

import typer
from rich.console import Console
from rich.markup import escape
from typer._click import exceptions as click_exc  # typer's vendored click
from typer.core import TyperGroup

from tfhelm.apierrors import user_facing
from tfhelm.errors import BAD_INPUT, UsageError, exit_code, one_line

out = Console()  # results (manifests, JSON, export lines) go to stdout, so they can be piped
err = Console(stderr=True)  # progress, notes and errors

# Characters a terminal acts on rather than shows: C0 controls but tab and newline, DEL, C1,
# and the bidirectional overrides that reorder what is shown. Text from the cluster (a
# script's error, a log, an Event, a Lease's holder) is anyone's: shown escaped, never run.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def write(text: str) -> None:
    """Machine-made text (YAML or JSON, whose emitters escape control characters) to stdout
    as it is: rich's rendering would cost 0.2 s on the manifest of 10,000 workers."""
    out.file.write(text)
    out.file.flush()


def printable(text: str) -> str:
    r"""`text` with every character a terminal would act on written as an escape (`\x1b`)."""
    return _UNSAFE.sub(lambda m: (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                  else f"\\u{ord(m.group()):04x}"), text)


def note(message: str) -> None:
    """One step of a command's progress, as a dim bullet on stderr."""
    err.print(f"[dim]•[/dim] {escape(printable(message))}")


def line(text: str, console: Console | None = None) -> None:
    """One line of a report, as it is (no markup), its cluster-made parts made printable."""
    (console or out).print(printable(text), markup=False, highlight=False, soft_wrap=True)


def fail_line(message: str) -> None:
    err.print(f"[red]error:[/red] {escape(printable(message))}", highlight=False, soft_wrap=True)


def _report(e: BaseException) -> int:
    known = user_facing(e)
    if known is None:
        if os.environ.get("TFHELM_DEBUG"):
            raise e
        fail_line(one_line(f"internal error: {type(e).__name__}: {e} (TFHELM_DEBUG=1 shows the "
                           "traceback; please report it)"))
        return 1
    fail_line(str(known))
    return exit_code(known)


def cli_errors(fn):
    """Turn every failure of a command into one red line and its exit code."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, click_exc.ClickException, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - the edge: everything becomes one line
            raise typer.Exit(_report(e)) from None
    return wrapper


PLUGINS = "tfhelm.commands"  # the entry-point group of command groups other packages add


class OneLineErrors(TyperGroup):
    """The root command: Typer's own usage errors (a bad option value, an unknown option)
    become one line too, instead of a usage box. It also has the command groups other installed
    packages register (entry points `tfhelm.commands`: a checkout's `make install` adds
    `tfhelm cluster`), looked up only when a name is not tfhelm's own or the commands are
    listed, so no other command pays for the search."""

    def get_command(self, ctx, cmd_name):
        found = super().get_command(ctx, cmd_name) or _plugins().get(cmd_name)
        if isinstance(found, UsageError):
            raise found
        return found

    def list_commands(self, ctx):
        return [*super().list_commands(ctx), *(n for n, c in _plugins().items() if not isinstance(c, UsageError))]

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_exc.NoArgsIsHelpError as e:
            e.show()
            code = BAD_INPUT
        except click_exc.UsageError as e:
            hint = f" (see `{e.ctx.command_path} --help`)" if e.ctx else ""
            fail_line(one_line(e.format_message()) + hint)
            code = e.exit_code
        except click_exc.ClickException as e:
            fail_line(one_line(e.format_message()))
            code = e.exit_code
        except (typer.Abort, KeyboardInterrupt):
            err.print("interrupted")
            code = 130
        except Exception as e:  # noqa: BLE001 - the edge
            code = _report(e)
        sys.exit(code if isinstance(code, int) else 0)


@functools.cache
def _plugins() -> dict:
    from importlib.metadata import entry_points

    found = {}
    for ep in entry_points(group=PLUGINS):
        try:
            found[ep.name] = command = typer.main.get_command(ep.load())
        except Exception as e:  # noqa: BLE001 - a broken package takes no other command down
            found[ep.name] = UsageError(f"`tfhelm {ep.name}` comes from {ep.value}, which does not load: "
                                        f"{type(e).__name__}: {e}")
            continue
        command.name = ep.name  # a Typer app made into a command has none
    return found
