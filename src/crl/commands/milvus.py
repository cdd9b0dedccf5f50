"""``crl milvus start|stop|status --dir D``: the packaged Milvus standalone server (the extra crl[milvus]) on
this machine, started detached and found again by its folder (:mod:`crl.search.milvus_local`).

``start`` runs the server in a network namespace of its own, publishing its client and health ports on
127.0.0.1, records its process and ports in ``D/crl-milvus.json`` at once, waits until it answers (about 10 s;
until then it dies with the command) and prints its address, ``milvus://127.0.0.1:PORT``; a port that is taken
stops it at once, naming the port and the fix. ``stop`` stops the server recorded in D; ``status`` prints it, or
says that none runs (exit status 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crl.commands._console import print_note
from crl.commands._errors import EXIT_FAILED, EXIT_OK, run_reporting_errors
from crl.commands._help import FlagsCommand, FlagsGroup

if TYPE_CHECKING:
    from crl.search.milvus_local import ServerRecord

milvus_app = typer.Typer(
    name="milvus",
    help="Start, stop and inspect the packaged Milvus standalone server (crl[milvus]).",
    no_args_is_help=True,
    cls=FlagsGroup,
)

DIR_HELP = "The server's folder: its data, logs, config and crl-milvus.json (its pid and ports)."


@milvus_app.command("start", cls=FlagsCommand)
def start(
    folder: Annotated[Path, typer.Option("--dir", help=DIR_HELP)],
    port: Annotated[
        int,
        typer.Option(
            help="The client port, published on 127.0.0.1 (0: a free one, chosen and printed); Milvus's other "
            "ports stay inside its network namespace."
        ),
    ] = 19530,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the server to answer (> 0).")] = 120.0,
    exposed: Annotated[
        bool,
        typer.Option(
            "--exposed",
            help="Run without a network namespace (where the kernel refuses one): every Milvus port then "
            "listens on every interface, without a password; the ports are printed.",
        ),
    ] = False,
) -> None:
    """Start a Milvus server keeping its data in --dir, detached; print its address."""
    raise typer.Exit(milvus_start_command(folder, port, timeout, exposed))


@milvus_app.command("stop", cls=FlagsCommand)
def stop(folder: Annotated[Path, typer.Option("--dir", help=DIR_HELP)]) -> None:
    """Stop the Milvus server started from --dir."""
    raise typer.Exit(milvus_stop_command(folder))


@milvus_app.command("status", cls=FlagsCommand)
def status(folder: Annotated[Path, typer.Option("--dir", help=DIR_HELP)]) -> None:
    """Print the Milvus server started from --dir (exit status 1 when none runs)."""
    raise typer.Exit(milvus_status_command(folder))


def _described(record: ServerRecord) -> str:
    """One line naming a server: address, pid, ports, folder, whether it answers yet."""
    where = (
        f"in its own network namespace (listening there on {', '.join(map(str, record.namespace_ports))})"
        if record.isolated
        else f"exposed on every interface at {', '.join(map(str, record.listening))}"
    )
    return (
        f"milvus://{record.address} (pid {record.pid}, health http://127.0.0.1:{record.metrics_port}/healthz, "
        f"{where if record.ready else 'starting'}, data in {record.folder}, started {record.started})"
    )


def milvus_start_command(
    folder: Path, port: int = 19530, timeout: float = 120.0, exposed: bool = False
) -> int:
    """``crl milvus start``: 0 once the server answers, or 2 with one line (a port taken, a server already
    running from the folder, another start of it, no network namespace here without --exposed, a start that
    failed, naming its log)."""

    def body() -> int:
        # Deferred: crl.search loads faiss, which `crl --help` does not need.
        from crl.search.milvus_local import exposure_note, start_detached

        print_note(f"starting Milvus in {folder} (about 10 s)")
        record = start_detached(folder, port=port, timeout_s=timeout, exposed=exposed)
        typer.echo(f"running: {_described(record)}")
        print_note(exposure_note(record))
        return EXIT_OK

    return run_reporting_errors(body)


def milvus_stop_command(folder: Path) -> int:
    """``crl milvus stop``: 0 once the server recorded in ``folder`` is gone (or when none ran), 2 on a bad
    record."""

    def body() -> int:
        # Deferred: crl.search loads faiss, which `crl --help` does not need.
        from crl.search.milvus_local import stop_detached

        stopped = stop_detached(folder)
        typer.echo(f"stopped pid {stopped.pid}" if stopped else f"no Milvus server runs from {folder}")
        return EXIT_OK

    return run_reporting_errors(body)


def milvus_status_command(folder: Path) -> int:
    """``crl milvus status``: 0 and the server's line while it runs, 1 when none runs from ``folder``."""

    def body() -> int:
        # Deferred: crl.search loads faiss, which `crl --help` does not need.
        from crl.search.milvus_local import server_status

        record = server_status(folder)
        if record is None:
            typer.echo(f"not running: no Milvus server runs from {folder}")
            return EXIT_FAILED
        typer.echo(f"running: {_described(record)}")
        return EXIT_OK

    return run_reporting_errors(body)
