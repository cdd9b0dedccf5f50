"""``crl power``: the power of a trained claim's rule at a design, by the one power method, from pilot or
exploratory runs before a confirmatory run (a thin layer over :mod:`crl.claims.power_claims`; docs/theory.md
section 7, "Confirmatory seeds" and contract v4)."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from crl.commands._errors import EXIT_OK, run_reporting_errors


def power(
    sources: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Run folders (`crl verify --out`) or cell tables (--export-cells): two give two independent seed "
            "sets, one is split into the halves of its seeds (not needed with --rejudge)."
        ),
    ] = None,
    claim: Annotated[
        str,
        typer.Option(help="Any claim but C8, a check (any claim for --export-cells and --rejudge)."),
    ] = "C5",
    fidelity: Annotated[
        str, typer.Option(help="The fidelity whose grids the cells are read on.")
    ] = "standard",
    seeds: Annotated[
        int | None,
        typer.Option(help="Seeds of the design whose power is computed (default: the fidelity's)."),
    ] = None,
    resamples: Annotated[
        int, typer.Option(help="Synthetic designs per seed set (a gate needs >= 200).")
    ] = 400,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic designs.")] = 0,
    choose_q: Annotated[
        bool, typer.Option(help="C6: the pilot's tolerance choice instead of the power.")
    ] = False,
    export_cells: Annotated[
        Path | None,
        typer.Option(help="Any claim: write the one SOURCE's per-seed cells of --claim here (.jsonl.gz)."),
    ] = None,
    rejudge: Annotated[
        Path | None,
        typer.Option(help="Any claim: judge --claim by this checkout's rule on a table of --export-cells."),
    ] = None,
    run_seed: Annotated[
        int, typer.Option(help="With --rejudge: the `crl verify --seed` of the run that wrote the table.")
    ] = 0,
) -> None:
    """Print a trained claim's power at a design by the one power method (every part and control, on two seed
    sets), or C6's tolerance choice; write any claim's per-seed cells, or re-judge a claim from them."""

    def body() -> int:
        found = list(sources or [])
        if export_cells is not None or rejudge is not None:
            return _cells_action(found, claim, fidelity, export_cells, rejudge, run_seed)
        if not found:
            raise ValueError("SOURCES is missing; pass one or two run folders or cell tables of the claim.")
        if choose_q and claim != "C6":
            raise ValueError("--choose-q is C6's tolerance choice; pass --claim C6.")
        # Deferred: the claims load torch, which `crl --help` does not need.
        from crl.claims.context import Fidelity

        # Deferred: the power calculation loads the claims and torch, which `crl --help` does not need.
        from crl.claims.power_claims import design_seeds, power_text, tolerance_text

        level = Fidelity(fidelity)
        if choose_q:
            if len(found) != 1:
                raise ValueError("--choose-q reads one pilot: pass one SOURCE.")
            text = tolerance_text(found[0], level)
        else:
            size = seeds if seeds is not None else design_seeds(claim, level)
            text = power_text(found, claim, level, seeds=size, resamples=resamples, seed=seed)
        Console(soft_wrap=True).print(text, markup=False, highlight=False)
        return EXIT_OK

    raise typer.Exit(run_reporting_errors(body))


def _cells_action(
    sources: list[Path],
    claim: str,
    fidelity: str,
    export_cells: Path | None,
    rejudge: Path | None,
    run_seed: int,
) -> int:
    """``--export-cells`` or ``--rejudge`` (:mod:`crl.claims.replay`), for any claim."""
    if export_cells is not None and rejudge is not None:
        raise ValueError("pass one of --export-cells and --rejudge, not both.")
    # Deferred: the replay loads every claim and torch, which `crl --help` does not need.
    from crl.claims import context, replay

    console = Console(soft_wrap=True)
    if export_cells is not None:
        if len(sources) != 1:
            raise ValueError(
                "--export-cells reads one SOURCE: pass the `crl verify --out` folder whose cells to export."
            )
        count = replay.export_cells(sources[0], claim, export_cells)
        console.print(f"wrote {count} cells of {claim} to {export_cells}", markup=False, highlight=False)
        return EXIT_OK
    assert rejudge is not None
    result = replay.rejudge(rejudge, claim, context.Fidelity(fidelity), run_seed)
    console.print("\n".join(replay.verdict_lines(result)), markup=False, highlight=False)
    return EXIT_OK
