"""How every command reports an expected error: one clean line on stderr and an exit status, no traceback.

Expected errors are the ones crl raises at its boundaries for bad input (``ValueError`` and its subclasses such
as a config error, naming the argument and the fix) and the operating system's (``OSError``: a missing path, a
full disk, a permission). Anything else is a bug and keeps its traceback. ``CRL_TRACEBACK=1`` shows the
traceback of an expected error too, for a bug report.

An output pipe closed by its reader (``crl search ... | head``) is no error: the command ends quietly, with the
status :data:`EXIT_PIPE_CLOSED` of a tool that SIGPIPE ended, as other command-line tools do.
"""

import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PIPE_CLOSED = 128 + signal.SIGPIPE
"""The status of a command whose reader closed its output pipe: a shell's status of a tool ended by SIGPIPE."""

EXPECTED_ERRORS: tuple[type[Exception], ...] = (ValueError, OSError)


def print_error(message: str) -> None:
    """Print ``error: message`` in red on stderr, unwrapped and without rich markup (paths stay whole)."""
    Console(stderr=True, soft_wrap=True).print(
        f"error: {message}", style="red", markup=False, highlight=False
    )


def describe(error: BaseException) -> str:
    """The one-line description of an expected error: its message, or for an ``OSError`` its text and path."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        return f"{error.strerror}: {error.filename}"
    return str(error)


def run_reporting_errors(body: Callable[[], int]) -> int:
    """Run a command's body; an expected error becomes one message on stderr and exit status 2, and an output
    pipe its reader closed ends the command quietly (:func:`closed_output`).

    Returns:
        The body's exit status, :data:`EXIT_USAGE` when it raised an expected error, or
        :data:`EXIT_PIPE_CLOSED` when its output pipe was closed.
    """
    try:
        return body()
    except BrokenPipeError:
        return closed_output()
    except EXPECTED_ERRORS as error:
        if os.environ.get("CRL_TRACEBACK") == "1":
            raise
        print_error(describe(error))
        return EXIT_USAGE


def closed_output() -> int:
    """:data:`EXIT_PIPE_CLOSED`, once stdout points to the null device: what is still buffered for the closed pipe
    is dropped there, so the interpreter's last flush raises nothing ("Exception ignored ... Broken pipe")."""
    try:
        stdout = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return EXIT_PIPE_CLOSED
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, stdout)
    os.close(null)
    return EXIT_PIPE_CLOSED


@contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Show each warning raised inside (a damaged checkpoint skipped, a half-written log line dropped) as one
    ``warning: ...`` line on stderr, without Python's source-line decoration."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        Console(stderr=True, soft_wrap=True).print(
            f"warning: {message}", style="yellow", markup=False, highlight=False
        )

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield
