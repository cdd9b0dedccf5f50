"""``crl index build CHECKPOINT --out DIR``: embed a data set with a trained checkpoint and save a search index.

``--to milvus://HOST:PORT/NAME`` also copies the saved index into a new Milvus collection, as ``crl index export``
does (same kind, IVF-PQ as IVF; the collection records the encoder, so text queries work against it).

Data: ``--data FILE --key x`` (an .npz or a folder of .npy files, as ``crl embed`` reads; ``--labels-key``
adds each item's label as metadata) or, without ``--data``, the training split of the run's own labelled
data (Fashion-MNIST, digits, your labelled arrays: for images, the training pairs' images, without the
validation images), each item with its label. Item ids are the row numbers. The vectors are the run's choice of
backbone features h or embedding z (:mod:`crl.train.vectors`), or ``--vectors h|z``; the manifest records them.
Without ``--kind`` the kind follows N (:func:`crl.serving.encoded.choose_kind`: flat up to 50,000 items,
HNSW beyond; docs/search.md gives the measurements behind the rule).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer

from crl._lines import lines_of_items
from crl._validate import missing_file
from crl.commands._errors import EXIT_OK, run_reporting_errors
from crl.commands._help import FlagsCommand, FlagsGroup
from crl.commands._progress import LOGGER, announce_import, stages_on_stderr
from crl.commands.embed import VECTORS_HELP, numeric_inputs

index_app = typer.Typer(
    name="index", help="Build similarity-search indexes of embeddings.", no_args_is_help=True, cls=FlagsGroup
)


@index_app.command("build", cls=FlagsCommand)
def build(
    checkpoint: Annotated[
        Path,
        typer.Argument(help="A checkpoint (step-*.safetensors) or a run folder (its newest checkpoint)."),
    ],
    out: Annotated[Path, typer.Option(help="The folder to save the index into.")],
    data: Annotated[
        Path | None, typer.Option(help="An .npz or folder of .npy files (default: the run's training data).")
    ] = None,
    key: Annotated[str, typer.Option(help="The array of --data to embed.")] = "x",
    labels_key: Annotated[str, typer.Option(help="An (N,) integer array of --data stored as labels.")] = "",
    kind: Annotated[str, typer.Option(help="flat, hnsw, ivf, ivfpq or auto (by N).")] = "auto",
    metric: Annotated[
        str, typer.Option(help="cosine or ip (inner product of the raw embeddings).")
    ] = "cosine",
    tower: Annotated[str, typer.Option(help="anchor (f) or positive (g).")] = "anchor",
    m: Annotated[
        int | None, typer.Option("--m", help="HNSW links per node, or IVF-PQ sub-quantizers.")
    ] = None,
    ef_construction: Annotated[int | None, typer.Option(help="HNSW efConstruction.")] = None,
    ef_search: Annotated[int | None, typer.Option(help="HNSW efSearch (default of later searches).")] = None,
    nlist: Annotated[int | None, typer.Option(help="IVF cells.")] = None,
    nprobe: Annotated[int | None, typer.Option(help="IVF cells probed (default of later searches).")] = None,
    nbits: Annotated[int | None, typer.Option(help="IVF-PQ bits per code.")] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto.")] = "auto",
    batch_size: Annotated[int | None, typer.Option(help="Inputs per forward pass.")] = None,
    vectors: Annotated[str | None, typer.Option(help=VECTORS_HELP)] = None,
    text_file: Annotated[
        Path | None,
        typer.Option(help="Index these UTF-8 lines with MiniLM; CHECKPOINT is 'minilm' or a model folder."),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to", help="Also copy the index into a new Milvus collection: milvus://HOST:PORT/NAME."
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite", help="Replace the index in OUT (and the --to collection) when one exists."
        ),
    ] = False,
) -> None:
    """Embed a data set with CHECKPOINT and save a faiss index of it in OUT (and, with --to, a Milvus copy)."""
    given = {
        "M": m,
        "efConstruction": ef_construction,
        "efSearch": ef_search,
        "nlist": nlist,
        "nprobe": nprobe,
        "nbits": nbits,
    }
    params = {name: value for name, value in given.items() if value is not None}
    if text_file is not None:
        built = index_text_command(
            str(checkpoint), text_file, out, kind, params, vectors=vectors, overwrite=overwrite
        )
    else:
        built = index_build_command(
            checkpoint,
            out=out,
            data=data,
            key=key,
            labels_key=labels_key,
            kind=kind,
            metric=metric,
            tower=tower,
            params=params,
            device=device,
            batch_size=batch_size,
            vectors=vectors,
            overwrite=overwrite,
        )
    if built != EXIT_OK or to is None:
        raise typer.Exit(built)
    raise typer.Exit(index_export_command(out, to, overwrite=overwrite))


@index_app.command("export", cls=FlagsCommand)
def export(
    index_dir: Annotated[Path, typer.Argument(help="A folder written by crl index build (or Index.save).")],
    to: Annotated[
        str, typer.Option("--to", help="The new Milvus collection: milvus://HOST:PORT/COLLECTION.")
    ],
    kind: Annotated[
        str, typer.Option(help="flat, hnsw, ivf or auto (the index's own; IVF-PQ as ivf).")
    ] = "auto",
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace the collection when it exists already.")
    ] = False,
) -> None:
    """Copy the index in INDEX_DIR (vectors, ids, metadata) into a new Milvus collection (crl[milvus]).

    The collection appears under its name only once every item is in; an interrupted export leaves none.
    """
    raise typer.Exit(index_export_command(index_dir, to, kind, overwrite=overwrite))


def index_export_command(index_dir: Path, to: str, kind: str = "auto", *, overwrite: bool = False) -> int:
    """``crl index export DIR --to milvus://... [--overwrite]``: 0, or 2 with one line for bad input."""

    def body() -> int:
        stages = logging.getLogger(LOGGER)
        with stages_on_stderr():
            announce_import(f"crl index export {index_dir}: importing faiss and pymilvus (seconds)", "faiss")
            # Deferred: it loads torch and faiss, which `crl --help` does not need.
            from crl.search import Index

            # Deferred: it loads faiss (and pymilvus on use), which `crl --help` does not need.
            from crl.search.milvus import MILVUS_KINDS, MilvusAddress, export_index

            if kind != "auto" and kind not in MILVUS_KINDS:
                raise ValueError(f"--kind {kind!r}; pass auto or one of {', '.join(MILVUS_KINDS)}")
            stages.info("loading the index %s", index_dir)
            index = Index.load(index_dir)
            MilvusAddress.parse(to)
            stages.info(
                "copying %s items into %s, then building and loading its index (seconds)",
                f"{len(index):,}",
                to,
            )
            collection = export_index(
                index,
                to,
                kind=None if kind == "auto" else kind,  # type: ignore[arg-type]
                overwrite=overwrite,
            )
        typer.echo(f"exported {len(index)} items of {index_dir} into {collection!r}")
        return EXIT_OK

    return run_reporting_errors(body)


def index_text_command(
    model: str,
    text_file: Path,
    out: Path,
    kind: str,
    params: dict[str, int],
    *,
    vectors: str | None = None,
    overwrite: bool = False,
) -> int:
    """``crl index build MODEL --text-file FILE --out DIR``: the lines of FILE indexed by MiniLM; 0 or 2 (also
    for ``vectors``, which texts do not take, and an OUT holding files already unless ``overwrite``)."""

    def body() -> int:
        if vectors is not None:
            raise ValueError(
                f"--vectors {vectors}: texts are embedded by the text model as it is; drop --vectors"
            )
        check_out(out, overwrite)
        if not text_file.is_file():
            raise ValueError(f"--text-file {text_file} {missing_file(text_file)}; pass a UTF-8 text file")
        with stages_on_stderr():
            announce_import("importing torch and transformers (a few seconds)")
            # Deferred: it loads torch and faiss, which `crl --help` does not need.
            from crl.serving.text import text_index

            try:
                lines = lines_of_items(text_file.read_bytes().decode("utf-8"), f"--text-file {text_file}")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"--text-file {text_file}: not UTF-8 text (byte {error.start}); save it as UTF-8"
                ) from None
            chosen = None if kind == "auto" else kind
            index = text_index(lines, model, kind=chosen, metric="cosine", **params)  # type: ignore[arg-type]
        index.save(out)
        typer.echo(f"indexed {len(index)} texts ({index!r}) into {out}")
        return EXIT_OK

    return run_reporting_errors(body)


def index_build_command(
    checkpoint: Path,
    *,
    out: Path,
    data: Path | None = None,
    key: str = "x",
    labels_key: str = "",
    kind: str = "auto",
    metric: str = "cosine",
    tower: str = "anchor",
    params: dict[str, int] | None = None,
    device: str = "auto",
    batch_size: int | None = None,
    vectors: str | None = None,
    overwrite: bool = False,
) -> int:
    """Run ``crl index build`` with ``vectors`` ('h', 'z', or None for the run's choice); 0, or 2 with one line for
    bad input (an OUT holding files already among it, unless ``overwrite``)."""

    def body() -> int:
        check_out(out, overwrite)
        # Deferred: it loads torch and faiss, which `crl --help` does not need.
        from crl.search import KINDS, METRICS

        if kind != "auto" and kind not in KINDS:
            raise ValueError(f"--kind {kind!r} is not known; use auto, {', '.join(KINDS)}")
        if metric not in METRICS:
            raise ValueError(f"--metric {metric!r} is not known; use {' or '.join(METRICS)}")
        with stages_on_stderr():
            announce_import(f"crl index build {checkpoint}: importing torch (a few seconds)")
            inputs, labels = _inputs(checkpoint, data, key, labels_key)
            # Deferred: it loads torch and faiss, which `crl --help` does not need.
            from crl.serving.encoded import build_from_checkpoint

            metadata = None if labels is None else [{"label": int(label)} for label in labels]
            logging.getLogger(LOGGER).info(
                "embedding %s inputs with the %s tower, then indexing them", f"{len(inputs):,}", tower
            )
            index = build_from_checkpoint(
                checkpoint,
                inputs,
                kind=None if kind == "auto" else kind,  # type: ignore[arg-type]
                metric=metric,
                metadata=metadata,
                tower=tower,
                device=device,
                batch_size=batch_size,
                vectors=vectors,
                **(params or {}),
            )
        index.save(out)
        typer.echo(f"indexed {len(index)} items ({index!r}) into {out}")
        if index.encoder is not None:
            typer.echo(f"vectors {index.encoder.vectors} (recorded in the index's manifest)")
        return EXIT_OK

    return run_reporting_errors(body)


def check_out(out: Path, overwrite: bool) -> None:
    """Refuse an ``--out`` folder that holds files already (an index: 7 items replaced by 2, silently), unless
    ``overwrite``."""
    if overwrite or not out.is_dir() or not any(out.iterdir()):
        return
    raise ValueError(
        f"--out {out} holds an index (or other files) already; pass --overwrite to replace it, or another --out"
    )


def _inputs(checkpoint: Path, data: Path | None, key: str, labels_key: str) -> tuple[Any, Any]:
    """(inputs, labels or None) of --data, or of the run's own labelled training split."""
    # Deferred: torch takes seconds to import, and `crl --help` does not need it.
    import torch

    if data is not None:
        # Deferred: it loads torch, which `crl --help` does not need.
        from crl.data import read_arrays

        keys = [key] + ([labels_key] if labels_key else [])
        try:
            arrays = read_arrays(data, keys)
        except KeyError as error:
            raise ValueError(f"--key/--labels-key: {error.args[0]}") from None
        labels = arrays.get(labels_key) if labels_key else None
        if labels is not None and (labels.ndim != 1 or labels.dtype.kind not in "iu"):
            raise ValueError(
                f"--labels-key {labels_key!r} must name an (N,) integer array, got {labels.dtype}"
            )
        return torch.from_numpy(numeric_inputs(arrays[key], key)), labels
    if labels_key:
        raise ValueError("--labels-key needs --data (the run's own data brings its labels)")
    logging.getLogger(LOGGER).info("reading the run's own training split")
    # Deferred: it loads torch, which `crl --help` does not need.
    from crl.train.checkpoint import load_train_state, resolve_checkpoint

    # Deferred: it loads torch, which `crl --help` does not need.
    from crl.train.data import labelled_inputs

    config = load_train_state(resolve_checkpoint(checkpoint)).config
    labelled = labelled_inputs(config.data, "train")
    if labelled is None:
        raise ValueError(
            f"the run's data (source = {config.data.source!r}) has no labelled items to index; pass --data FILE"
        )
    return labelled.inputs, labelled.labels.numpy()
