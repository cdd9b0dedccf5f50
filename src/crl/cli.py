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
    threads: Annotated[
        int, typer.Option(help="torch threads in this process (claims are many small tensor operations).")
    ] = 1,
    fresh: Annotated[bool, typer.Option(help="Delete OUT/results.sqlite instead of resuming.")] = False,
) -> None:
    """Run the pre-registered claims (THEORY.md section 7) and write their report; exit 1 if one fails."""
    from crl.verify import verify_command

    status = verify_command(
        fidelity=fidelity, claims=claims, out=out, seed=seed, workers=workers, threads=threads, fresh=fresh
    )
    raise typer.Exit(status)


@app.command()
def train(
    config: Annotated[Path, typer.Argument(help="TOML config (see configs/fashion_sscrl.toml).")],
) -> None:
    """Train a contrastive encoder; resumes from the newest checkpoint of the run folder.

    Distributed: torchrun --nproc_per_node=K -m crl train CONFIG (gloo on CPU, nccl on CUDA).
    """
    from crl.train.commands import train_command

    raise typer.Exit(train_command(config))


@app.command("eval")
def evaluate(
    checkpoint: Annotated[
        Path,
        typer.Argument(help="A checkpoint (step-*.safetensors) or a run folder (its newest checkpoint)."),
    ],
    out: Annotated[
        Path | None, typer.Option(help="Where to write the JSON (default: RUN_DIR/eval.json).")
    ] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto.")] = "auto",
) -> None:
    """Held-out retrieval (recall@k, MRR, nDCG@10, MAP, AUC) and kNN / linear-probe accuracy of a checkpoint."""
    from crl.evaluate import eval_command

    raise typer.Exit(eval_command(checkpoint, out=out, device=device))
