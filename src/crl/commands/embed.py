"""``crl embed CHECKPOINT --data FILE --key x --out vectors.npy``: embed an array with a trained checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crl.commands._errors import EXIT_OK, run_reporting_errors

if TYPE_CHECKING:
    from crl.evaluate import Tower


def embed(
    checkpoint: Annotated[
        Path,
        typer.Argument(help="A checkpoint (step-*.safetensors) or a run folder (its newest checkpoint)."),
    ],
    data: Annotated[Path, typer.Option(help="An .npz file, or a folder of <key>.npy files.")],
    out: Annotated[Path, typer.Option(help="Where to write the (N, d) float32 vectors (.npy).")],
    key: Annotated[str, typer.Option(help="The array in --data to embed, (N, ...) inputs.")] = "x",
    tower: Annotated[
        str, typer.Option(help="anchor (f, for x-like inputs) or positive (g, for y-like inputs).")
    ] = "anchor",
    device: Annotated[str, typer.Option(help="cpu, cuda or auto.")] = "auto",
    batch_size: Annotated[
        int | None, typer.Option(help="Inputs per forward pass (default: the run's eval.batch_size).")
    ] = None,
) -> None:
    """Embed the array KEY of DATA with a trained checkpoint's tower and save the vectors as .npy."""
    raise typer.Exit(
        embed_command(
            checkpoint, data=data, key=key, out=out, tower=tower, device=device, batch_size=batch_size
        )
    )


def embed_command(
    checkpoint: Path,
    *,
    data: Path,
    key: str,
    out: Path,
    tower: str = "anchor",
    device: str = "auto",
    batch_size: int | None = None,
) -> int:
    """Run ``crl embed``: read the array, embed it (:func:`crl.evaluate.embed_array`), write ``out``; 0 or 2."""

    def body() -> int:
        import numpy as np
        import torch

        from crl.data import read_arrays
        from crl.evaluate import embed_array

        try:
            array = read_arrays(data, [key])[key]
        except KeyError as error:
            raise ValueError(f"--key {key!r}: {error.args[0]}") from None
        vectors = embed_array(
            checkpoint,
            torch.from_numpy(array),
            tower=parse_tower(tower),
            device=device,
            batch_size=batch_size,
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        np.save(out, vectors.numpy())
        typer.echo(f"embedded {vectors.shape[0]} inputs into {vectors.shape[1]} dimensions: {out}")
        return EXIT_OK

    return run_reporting_errors(body)


def parse_tower(text: str) -> Tower:
    """``--tower``: 'anchor' or 'positive'.

    Raises:
        ValueError: for any other value, naming the two.
    """
    if text == "anchor":
        return "anchor"
    if text == "positive":
        return "positive"
    raise ValueError(f"--tower {text!r} is not known; use 'anchor' (f, for x) or 'positive' (g, for y)")
