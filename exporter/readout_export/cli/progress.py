"""Progress of long work (build, parity, bench), on stderr, so stdout stays the result (``--json`` included).

On a terminal each step is printed as it starts and the step in flight shows a live elapsed time (rich's
progress display), so a minute of int8 calibration never looks like a hang; anywhere else (a pipe, a CI
log) each step is one plain line.
"""
from __future__ import annotations

import sys
import time
from typing import Any

import click


class Steps:
    """A ``progress(message)`` callable for `readout_export.build.build` and friends; a context manager that
    starts and stops the live display. ``enabled``: False prints nothing (``--quiet``)."""

    def __init__(self, enabled: bool = True, live: bool | None = None) -> None:
        self.enabled = enabled
        self.live = enabled and (sys.stderr.isatty() if live is None else live)
        self._display: Any = None
        self._task: Any = None
        self.started = time.monotonic()

    def __enter__(self) -> "Steps":
        if self.live:
            try:
                from rich.console import Console
                from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
            except ImportError:  # the export extra brings rich; without it, plain lines
                self.live = False
                return self

            self._display = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                                     console=Console(stderr=True), transient=True)
            self._display.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._display is not None:
            self._display.stop()
            self._display = None

    def __call__(self, message: str) -> None:
        if not self.enabled:
            return
        if self._display is None:
            click.echo(f"  {message}", err=True)
            return
        self._display.console.print(f"  {message}", markup=False, highlight=False)
        if self._task is not None:
            self._display.remove_task(self._task)
        self._task = self._display.add_task(message.strip()[:100])  # its own clock: the step in flight
