"""The console a command prints its tables to: the terminal's width on a terminal, a wide line elsewhere; and the
notes and status lines it writes on stderr.

rich lays a table out for 80 columns when the output is not a terminal (a pipe, a file, a CI log), and a column
marked ``no_wrap`` is then cut with an ellipsis. Off a terminal crl prints to :data:`WIDE` columns instead (or
``$COLUMNS`` when set), so each row stays whole on one line and can be grepped; on a terminal rich folds cells
at spaces to fit.
"""

import os

from rich.console import Console

WIDE = 200
"""Columns of a command's output when it is not a terminal and ``$COLUMNS`` is unset."""


def output_console() -> Console:
    """A soft-wrapping console on stdout: the terminal's width, else ``$COLUMNS``, else :data:`WIDE`."""
    console = Console(soft_wrap=True)
    if console.is_terminal or os.environ.get("COLUMNS"):
        return console
    return Console(soft_wrap=True, width=WIDE)


def print_note(message: str) -> None:
    """Print ``note: message`` on stderr, unwrapped and without rich markup: something the user should know that
    is not an error (the output, on stdout, stays clean)."""
    Console(stderr=True, soft_wrap=True).print(f"note: {message}", markup=False, highlight=False)
