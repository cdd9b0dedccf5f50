"""The `crl` command line: parses arguments and calls the library, nothing more.

Each command lives next to the library part it drives and is registered here.
"""

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="crl",
    help="Contrastive representation learning for similarity search, with its statistical theory built in.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def version() -> None:
    """Print crl's version."""
    from crl import __version__

    typer.echo(__version__)


@app.command()
def verify(
    fidelity: Annotated[
        str, typer.Option(help="quick (<= 3 min, CI), standard (<= 20 min), full.")
    ] = "standard",
    claims: Annotated[str | None, typer.Option(help="Claim ids, e.g. C3,C7 (default: all).")] = None,
    out: Annotated[Path, typer.Option(help="Output folder (reports, figures, SQLite).")] = Path(
        "runs/verify"
    ),
    seed: Annotated[int, typer.Option(help="Base seed of every claim's seeds.")] = 0,
    workers: Annotated[int, typer.Option(help="Processes computing a claim's cells.")] = 1,
    fresh: Annotated[bool, typer.Option(help="Delete OUT/results.sqlite instead of resuming.")] = False,
) -> None:
    """Run the pre-registered claims (THEORY.md section 7) and write their report; exit 1 if one fails."""
    from crl.verify import verify_command

    status = verify_command(
        fidelity=fidelity, claims=claims, out=out, seed=seed, workers=workers, fresh=fresh
    )
    raise typer.Exit(status)
