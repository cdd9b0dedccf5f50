"""No silent waits: what a long command is doing, on stderr, while it does it.

The library says what it starts on the standard ``logging`` logger ``crl`` (INFO records: "loading the text
model ...", "ranking 300 queries ..."), a record with ``extra={"progress": (done, total)}`` saying how far a
stage has come; it prints nothing itself. A command wraps its slow part in :func:`stages_on_stderr`, which shows
those records on stderr: on a terminal a rich progress display (one line per stage, a bar where the stage counts,
the elapsed time), elsewhere (a file, a pipe, a CI log) one plain line per stage and nothing per step, so stdout
stays the command's output.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TimeElapsedColumn

LOGGER = "crl"
"""The logger whose INFO records are the stages of a command."""


class StageDisplay(logging.Handler):
    """Shows the stage records of the ``crl`` logger on ``console`` (stderr by default): a progress display on a
    terminal (none when ``live`` is False: the command shows its own, such as crl train's bar), one line per
    stage elsewhere. Close it to end the display."""

    def __init__(self, console: Console | None = None, *, live: bool = True) -> None:
        super().__init__(logging.INFO)
        self.console = console if console is not None else Console(stderr=True, soft_wrap=True)
        self.live = live
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def emit(self, record: logging.LogRecord) -> None:
        """Start a stage (a record without ``progress``) or move the current one on (a record with it)."""
        message, progress = record.getMessage(), getattr(record, "progress", None)
        if not self.console.is_terminal:
            if progress is None:
                self.console.print(f"crl: {message}", markup=False, highlight=False)
            return
        if not self.live:
            return
        if progress is not None and self._progress is not None and self._task is not None:
            done, total = progress
            self._progress.update(self._task, completed=done, total=total)
            return
        self._finish_task()
        if self._progress is None:
            self._progress = Progress(
                SpinnerColumn(),
                "{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._progress.start()
        self._task = self._progress.add_task(message, total=None if progress is None else progress[1])

    def _finish_task(self) -> None:
        """Mark the current stage done (its bar full)."""
        if self._progress is not None and self._task is not None:
            task = self._progress.tasks[-1]
            total = task.total if task.total is not None else 1
            self._progress.update(self._task, completed=total, total=total)

    def close(self) -> None:
        """End the display: the last stage done, the progress lines left on the terminal."""
        self._finish_task()
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        super().close()


@contextmanager
def stages_on_stderr(console: Console | None = None, *, live: bool = True) -> Iterator[None]:
    """Show the ``crl`` logger's stage records on stderr (or ``console``) while the block runs; ``live=False``
    shows them only off a terminal (:class:`StageDisplay`)."""
    logger = logging.getLogger(LOGGER)
    display = StageDisplay(console, live=live)
    before = logger.level
    logger.addHandler(display)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(display)
        logger.setLevel(before)
        display.close()


def announce_import(stage: str, module: str = "torch") -> None:
    """Start ``stage``, the seconds of a first import of ``module``, on the ``crl`` logger; nothing when the
    process has loaded it already (no wait to announce)."""
    if module not in sys.modules:
        logging.getLogger(LOGGER).info(stage)
