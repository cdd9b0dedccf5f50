"""``crl power``: the power of a trained claim's rule from an exploratory run, before its confirmatory run (a thin
layer over :mod:`crl.claims.power`; docs/theory.md section 7, "Confirmatory seeds")."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from crl.commands._errors import EXIT_OK, run_reporting_errors

POWER_CLAIMS = ("C5", "C6", "C10")


def power(
    run_dir: Annotated[
        Path | None,
        typer.Argument(
            help="A `crl verify --out` folder, or for C6's --choose-q and --gate a table of --export-cells "
            "(not needed with --rejudge)."
        ),
    ] = None,
    claim: Annotated[str, typer.Option(help="C5, C6 or C10.")] = "C5",
    fidelity: Annotated[str, typer.Option(help="The run's fidelity: quick, standard or full.")] = "standard",
    resamples: Annotated[
        int, typer.Option(help="Resamples of whole seeds (the contract asks >= 200).")
    ] = 200,
    seeds: Annotated[
        int | None,
        typer.Option(help="Seeds per resample (C5, C10: default as measured; C6's gate: 3/8 of the run's)."),
    ] = None,
    control_seeds: Annotated[
        int | None, typer.Option(help="C5, C10: seeds of the control's resamples.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the resampling (C5, C10).")] = 0,
    choose_q: Annotated[bool, typer.Option(help="C6: the pilot's tolerance choice.")] = False,
    gate: Annotated[bool, typer.Option(help="C6: the power gate on two halves of the seeds.")] = False,
    q: Annotated[
        float | None, typer.Option(help="C6's gate: the tolerance (default: the registered one).")
    ] = None,
    export_cells: Annotated[
        Path | None,
        typer.Option(
            help="Any claim: write RUN_DIR's per-seed cells of --claim here (JSON lines, .jsonl.gz)."
        ),
    ] = None,
    rejudge: Annotated[
        Path | None,
        typer.Option(help="Any claim: judge --claim by this checkout's rule on a table of --export-cells."),
    ] = None,
    run_seed: Annotated[
        int, typer.Option(help="With --rejudge: the `crl verify --seed` of the run that wrote the table.")
    ] = 0,
) -> None:
    """Print a trained claim's power table as Markdown (C5, C10) or C6's tolerance choice or gate; write any claim's
    per-seed cells, or re-judge a claim from them."""

    def body() -> int:
        if export_cells is not None or rejudge is not None:
            return _cells_action(run_dir, claim, fidelity, export_cells, rejudge, run_seed)
        if claim not in POWER_CLAIMS:
            raise ValueError(
                f"--claim {claim!r} has no power calculation; use one of {', '.join(POWER_CLAIMS)}."
            )
        if claim == "C6" and choose_q == gate:
            raise ValueError("--claim C6 takes one of --choose-q and --gate.")
        if run_dir is None:
            raise ValueError("RUN_DIR is missing; pass the `crl verify --out` folder of an exploratory run.")
        # Deferred: the claims load torch, which `crl --help` does not need.
        from crl.claims.context import Fidelity

        # Deferred: the power tool loads the claims and torch, which `crl --help` does not need.
        from crl.claims.power import markdown, power_table, saturation_table

        level = Fidelity(fidelity)
        if claim == "C6":
            text = saturation_table(
                run_dir,
                level,
                gate=gate,
                q=q,
                seeds=seeds,
                resamples=resamples,
            )
        else:
            parts, control = power_table(
                run_dir,
                claim,
                level,
                resamples=resamples,
                seeds=seeds,
                control_seeds=control_seeds,
                seed=seed,
            )
            text = markdown(claim, parts, control)
        Console(soft_wrap=True).print(text, markup=False, highlight=False)
        return EXIT_OK

    raise typer.Exit(run_reporting_errors(body))


def _cells_action(
    run_dir: Path | None,
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
        if run_dir is None:
            raise ValueError("RUN_DIR is missing; pass the `crl verify --out` folder whose cells to export.")
        count = replay.export_cells(run_dir, claim, export_cells)
        console.print(f"wrote {count} cells of {claim} to {export_cells}", markup=False, highlight=False)
        return EXIT_OK
    assert rejudge is not None
    result = replay.rejudge(rejudge, claim, context.Fidelity(fidelity), run_seed)
    console.print("\n".join(replay.verdict_lines(result)), markup=False, highlight=False)
    return EXIT_OK
