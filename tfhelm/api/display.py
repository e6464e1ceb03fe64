"""Where the Python API shows progress, when asked: a live bar in Jupyter (an HTML output
updated in place, no widget library needed), the CLI's bars on a terminal, plain lines
elsewhere, or nothing. IPython and rich are imported only when shown."""

from __future__ import annotations

import html
import sys
from typing import Callable, Protocol


class Bars(Protocol):
    """What a wait shows (tfhelm.cluster.progress.wait_for_training calls these)."""

    def start(self, bars: list[tuple[str, int]]) -> None: ...
    def update(self, counts: list[int]) -> None: ...
    def note(self, text: str) -> None: ...
    def stop(self) -> None: ...


def in_jupyter() -> bool:
    """A Jupyter kernel runs this process (IPython is imported only if something did)."""
    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


class JupyterBars:
    """Bars as one HTML output of the notebook cell, updated in place."""

    def __init__(self) -> None:
        self._handle = None
        self._bars: list[tuple[str, int]] = []
        self._counts: list[int] = []
        self._notes: list[str] = []

    def start(self, bars: list[tuple[str, int]]) -> None:
        from IPython.display import HTML, display

        self._bars, self._counts = bars, [0] * len(bars)
        self._handle = display(HTML(self._html()), display_id=True)

    def update(self, counts: list[int]) -> None:
        if counts != self._counts:
            self._counts = counts
            self._show()

    def note(self, text: str) -> None:
        self._notes.append(text)
        if self._handle is None:  # a note outside a wait (up, reap): a line of its own
            print(text, file=sys.stderr, flush=True)
        else:
            self._show()

    def stop(self) -> None:
        self._show()
        self._handle = None

    def _show(self) -> None:
        if self._handle is not None:
            from IPython.display import HTML

            self._handle.update(HTML(self._html()))

    def _html(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(label)}</td><td><progress value='{n}' max='{total or 1}'></progress></td>"
            f"<td>{n}/{total}</td></tr>" for (label, total), n in zip(self._bars, self._counts))
        notes = "".join(f"<div>{html.escape(t)}</div>" for t in self._notes[-5:])
        return f"<table>{rows}</table>{notes}"


class NoBars:
    """Nothing shown."""

    def start(self, bars: list[tuple[str, int]]) -> None:
        pass

    def update(self, counts: list[int]) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def stop(self) -> None:
        pass


def bars(progress: bool | None | Bars) -> Bars:
    """`progress`: None shows a live bar where one can be seen (a Jupyter kernel, a terminal)
    and nothing elsewhere; True shows it everywhere (plain lines when not a terminal);
    False nothing; or bars of the caller's own."""
    if progress is False:
        return NoBars()
    if progress is not None and progress is not True:
        return progress
    if in_jupyter():
        return JupyterBars()
    if progress is None and not sys.stderr.isatty():
        return NoBars()
    from rich.console import Console

    from tfhelm.cluster.progress import ConsoleBars

    return ConsoleBars(Console(stderr=True))


def notes(progress: bool | None | Bars | Callable[[str], None]) -> Callable[[str], None]:
    """The steps of an action (`up`, `down`) as lines, when `progress` asks for them: never
    by default (None or False); True: where bars would show; or a function of the caller's."""
    if not progress:
        return lambda _: None
    if callable(progress):
        return progress
    return bars(True if progress is True else progress).note
