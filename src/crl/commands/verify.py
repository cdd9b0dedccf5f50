"""``crl verify``: run the pre-registered claims and write their report (a thin layer over :mod:`crl.verify`)."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from crl.commands._errors import EXIT_USAGE, print_error, run_reporting_errors, warnings_as_lines


def verify(
    fidelity: Annotated[
        str, typer.Option(help="quick (<= 3 min, CI), standard (<= 20 min), full.")
    ] = "standard",
    claims: Annotated[str | None, typer.Option(help="Claim ids, e.g. C3,C7 (default: all).")] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Output folder (reports, figures, SQLite); default runs/verify for standard (make verify's), "
            "runs/verify-quick and runs/verify-full for the others, so no fidelity replaces another's report."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Base seed of every claim's seeds.")] = 0,
    workers: Annotated[
        int, typer.Option(help="Processes computing a claim's cells (or CPUs of a local Ray instance).")
    ] = 1,
    executor: Annotated[
        str,
        typer.Option(
            help="Where cells are computed: process (this machine) or ray (needs crl's optional extra 'ray')."
        ),
    ] = "process",
    address: Annotated[
        str | None,
        typer.Option(
            help="Ray cluster to join with --executor ray, e.g. auto or HOST:6379 (default: start one)."
        ),
    ] = None,
    threads: Annotated[
        int, typer.Option(help="torch threads in this process (claims are many small tensor operations).")
    ] = 1,
    fresh: Annotated[bool, typer.Option(help="Delete OUT/results.sqlite instead of resuming.")] = False,
) -> None:
    """Run the pre-registered claims (docs/theory.md section 7) and write their report.

    Exits 1 when a claim FAILs or a negative control PASSes (or either raises, or a claim module is broken);
    INCONCLUSIVE verdicts exit 0 and are listed first, with their reasons.
    """
    status = verify_command(
        fidelity=fidelity,
        claims=claims,
        out=out if out is not None else default_out(fidelity),
        seed=seed,
        workers=workers,
        threads=threads,
        fresh=fresh,
        executor=executor,
        address=address,
    )
    raise typer.Exit(status)


def default_out(fidelity: str) -> Path:
    """The output folder of a fidelity (any case) when --out is not given: ``runs/verify`` for standard (the
    folder of ``make verify``'s report), ``runs/verify-FIDELITY`` for any other."""
    name = fidelity.strip().lower()
    return Path("runs/verify") if name == "standard" else Path(f"runs/verify-{name}")


def verify_command(
    *,
    fidelity: str,
    claims: str | None,
    out: Path,
    seed: int,
    workers: int,
    threads: int,
    fresh: bool,
    executor: str = "process",
    address: str | None = None,
) -> int:
    """:func:`crl.verify.run_verify` with usage errors printed as one line; returns the exit status.

    ``threads`` sets torch's intra-op threads for the run: the claims compute many small tensor operations, for
    which one thread is several times faster than two competing ones on a 2-core machine (quick: ~50 s vs ~240 s
    measured on a busy machine). ``executor`` and ``address`` choose where the cells are computed
    (:func:`crl.sweep.run.executor_named`); this process stores them, and ends a Ray session it started.
    A results.sqlite that SQLite cannot use is a usage error naming it (exit 2); warnings of the store (a cell
    damaged outside crl and recomputed, cells of an earlier crl without checksums) are one ``warning:`` line each.
    """
    if threads < 1:
        print_error(f"--threads {threads!r} must be >= 1.")
        return EXIT_USAGE

    def body() -> int:
        # Deferred: `crl --help` does not need the executors (ray's among them).
        from crl.sweep.run import executor_named

        runner = executor_named(executor, workers=workers, address=address)  # before the heavy imports

        # Deferred: torch takes seconds to import, and `crl --help` does not need it.
        import torch

        # Deferred: it loads torch, faiss and every claim, which `crl --help` does not need.
        from crl.verify import parse_fidelity, run_verify

        console = Console()
        if not console.is_terminal:
            console = Console(width=160)
        torch.set_num_threads(threads)
        try:
            with warnings_as_lines():
                return run_verify(
                    fidelity=parse_fidelity(fidelity),
                    out=out,
                    claim_ids=None if claims is None else claims.split(","),
                    seed=seed,
                    workers=workers,
                    executor=runner,
                    fresh=fresh,
                    console=console,
                ).exit_code
        finally:
            runner.close()

    return run_reporting_errors(body)
