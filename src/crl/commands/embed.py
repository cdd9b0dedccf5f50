"""``crl embed CHECKPOINT --data FILE --key x --out vectors.npy``: embed an array with a trained checkpoint.

The vectors are the run's choice of backbone features h or embedding z (:mod:`crl.train.vectors`, measured on its
validation images), or ``--vectors h|z``; the line printed names them and why.

``crl embed minilm --text "..." [--text ...] [--text-file FILE] --out vectors.npy`` embeds strings with the packaged
all-MiniLM-L6-v2 (loaded offline), or with a sentence-transformers model folder (e.g. a crl fine-tuned one) given
in place of ``minilm`` (:func:`crl.models.minilm.embed_texts`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer

from crl._lines import lines_of_items
from crl._validate import missing_file
from crl.commands._errors import EXIT_OK, run_reporting_errors
from crl.commands._progress import LOGGER, announce_import, stages_on_stderr

if TYPE_CHECKING:
    from crl.serving.evaluate import Tower


VECTORS_HELP = (
    "h (backbone features) or z (embedding); default: the run's choice, measured on its validation images."
)
"""The help of ``--vectors`` (crl embed, crl index build, crl eval)."""


def embed(
    checkpoint: Annotated[
        Path,
        typer.Argument(help="A checkpoint (step-*.safetensors) or a run folder (its newest checkpoint)."),
    ],
    out: Annotated[Path, typer.Option(help="Where to write the (N, d) float32 vectors (.npy).")],
    data: Annotated[
        Path | None, typer.Option(help="An .npz file, or a folder of <key>.npy files (array inputs).")
    ] = None,
    text: Annotated[
        list[str] | None,
        typer.Option(help="A string to embed (repeatable); CHECKPOINT is 'minilm' or a model folder."),
    ] = None,
    text_file: Annotated[
        Path | None,
        typer.Option(
            help="A UTF-8 file of strings to embed, one per line (a blank line is an error naming it: row i is "
            "line i + 1)."
        ),
    ] = None,
    max_seq_length: Annotated[
        int | None,
        typer.Option(
            help="Text: word pieces kept per string (longer: truncated); default: the model's own "
            "(its sentence_bert_config.json: 256 for minilm), as SentenceTransformer.encode."
        ),
    ] = None,
    key: Annotated[str, typer.Option(help="The array in --data to embed, (N, ...) inputs.")] = "x",
    tower: Annotated[
        str, typer.Option(help="anchor (f, for x-like inputs) or positive (g, for y-like inputs).")
    ] = "anchor",
    device: Annotated[str, typer.Option(help="cpu, cuda or auto.")] = "auto",
    batch_size: Annotated[
        int | None, typer.Option(help="Inputs per forward pass (default: the run's eval.batch_size).")
    ] = None,
    vectors: Annotated[str | None, typer.Option(help=VECTORS_HELP)] = None,
) -> None:
    """Embed the array KEY of DATA with a trained checkpoint's tower (or strings with MiniLM) and save them as .npy."""
    if text or text_file is not None:
        raise typer.Exit(
            embed_text_command(str(checkpoint), text or [], text_file, out, max_seq_length, vectors=vectors)
        )
    raise typer.Exit(
        embed_command(
            checkpoint,
            data=data,
            key=key,
            out=out,
            tower=tower,
            device=device,
            batch_size=batch_size,
            vectors=vectors,
        )
    )


def embed_text_command(
    model: str,
    texts: list[str],
    text_file: Path | None,
    out: Path,
    max_seq_length: int | None = None,
    *,
    vectors: str | None = None,
) -> int:
    """Run ``crl embed MODEL --text ...``: unit-norm MiniLM embeddings of the strings, truncated at
    ``max_seq_length`` word pieces (None: the model's own), written to ``out``; 0 or 2 (also for ``vectors``,
    which texts do not take)."""

    def body() -> int:
        if vectors is not None:
            raise ValueError(
                f"--vectors {vectors}: texts are embedded by the text model as it is; drop --vectors"
            )
        with stages_on_stderr():
            announce_import("importing torch and transformers (a few seconds)")
            # Deferred: it loads torch, which `crl --help` does not need.
            from crl.models.minilm import check_max_seq_length, embed_texts, max_positions

            strings = list(texts)
            if text_file is not None:
                if not text_file.is_file():
                    raise ValueError(
                        f"--text-file {text_file} {missing_file(text_file)}; pass a UTF-8 text file"
                    )
                try:
                    content = text_file.read_bytes().decode("utf-8")
                except UnicodeDecodeError as error:
                    raise ValueError(
                        f"--text-file {text_file}: not UTF-8 text (byte {error.start}); save it as UTF-8"
                    ) from None
                strings += lines_of_items(content, f"--text-file {text_file}")
            if max_seq_length is not None:
                check_max_seq_length(max_seq_length, max_positions(model), name="--max-seq-length")
            embeddings = embed_texts(strings, model, max_seq_length=max_seq_length)
        out.parent.mkdir(parents=True, exist_ok=True)
        np.save(out, embeddings.numpy())
        typer.echo(f"embedded {embeddings.shape[0]} texts into {embeddings.shape[1]} dimensions: {out}")
        return EXIT_OK

    return run_reporting_errors(body)


def embed_command(
    checkpoint: Path,
    *,
    data: Path | None,
    key: str,
    out: Path,
    tower: str = "anchor",
    device: str = "auto",
    batch_size: int | None = None,
    vectors: str | None = None,
) -> int:
    """Run ``crl embed``: read the array, embed it (:func:`crl.serving.evaluate.embed_array`) as ``vectors`` ('h',
    'z', or None for the run's choice), write ``out``; 0 or 2."""

    def body() -> int:
        if data is None:
            raise ValueError(
                "crl embed needs --data FILE (array inputs) or --text/--text-file (strings, MiniLM)"
            )
        with stages_on_stderr():
            announce_import(f"crl embed {checkpoint}: importing torch (a few seconds)")
            # Deferred: torch takes seconds to import, and `crl --help` does not need it.
            import torch

            # Deferred: it loads torch, which `crl --help` does not need.
            from crl.data import read_arrays

            try:
                array = read_arrays(data, [key])[key]
            except KeyError as error:
                raise ValueError(f"--key {key!r}: {error.args[0]}") from None
            inputs = torch.from_numpy(numeric_inputs(array, key))
            # Deferred: it loads torch and faiss, which `crl --help` does not need.
            from crl.serving.evaluate import embed_array

            logging.getLogger(LOGGER).info("embedding %s inputs with the %s tower", f"{len(inputs):,}", tower)
            embedded = embed_array(
                checkpoint,
                inputs,
                tower=parse_tower(tower),
                device=device,
                batch_size=batch_size,
                vectors=vectors,
            )
        out.parent.mkdir(parents=True, exist_ok=True)
        np.save(out, embedded.vectors.numpy())
        shape = embedded.vectors.shape
        typer.echo(f"embedded {shape[0]} inputs into {shape[1]} dimensions: {out}")
        typer.echo(embedded.used.describe())
        return EXIT_OK

    return run_reporting_errors(body)


_NON_NUMERIC = {
    "U": "strings",
    "S": "bytes",
    "c": "complex numbers",
    "M": "dates",
    "m": "time spans",
    "V": "records",
    "O": "objects",
}
"""What a numpy array of each non-numeric dtype kind holds, in words."""


def numeric_inputs(array: Any, key: str) -> Any:
    """The numpy array ``--key`` of ``--data`` if it holds numbers (bool, integers, floats), in native byte order.

    Raises:
        ValueError: for strings, bytes, dates, complex numbers or records, naming ``--key`` and the text route.
    """
    if array.dtype.kind not in "biuf":
        what = _NON_NUMERIC.get(array.dtype.kind, "values")
        raise ValueError(
            f"--key {key!r}: the array holds {what} ({array.dtype}), not real numbers (float, int or bool), which "
            "the encoder embeds. To embed text, pass --text-file FILE with 'minilm' or a sentence-transformers "
            "model folder"
        )
    return array.astype(array.dtype.newbyteorder("="), copy=False)


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
