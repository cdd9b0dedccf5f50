"""``crl serve DIR``: the HTTP search service of :mod:`crl.serving.service` over a saved index or a Milvus
collection (``milvus://HOST:PORT/COLLECTION``, the optional extra crl[milvus]), with uvicorn.

Text queries (``{"texts": [...]}``) of an index built from text (``crl index build minilm --text-file``, or a
collection exported from one) are embedded by the MiniLM string encoder, registered here as ``crl search``
registers it. A Milvus server that stops answering turns requests into 503s naming it until it is back.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crl.commands._errors import EXIT_OK, run_reporting_errors
from crl.commands._progress import announce_import, stages_on_stderr

if TYPE_CHECKING:
    from fastapi import FastAPI

    from crl.search import SearchBackend

MILVUS_CONSISTENCY = "Bounded"
"""The consistency of a served collection's reads unless --consistency says otherwise: Milvus's own default (a
search may miss the writes of the last few seconds; Strong sees them all at about 0.2 s per search)."""
MILVUS_TIMEOUT_S = 10.0
"""Seconds a request waits for a Milvus server before its 503, unless --timeout says otherwise."""


def serve(
    index_dir: Annotated[
        str,
        typer.Argument(
            help="A folder written by crl index build (or Index.save), or milvus://HOST:PORT/COLLECTION."
        ),
    ],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    max_batch: Annotated[int, typer.Option(help="Most queries per request.")] = 256,
    max_k: Annotated[int, typer.Option(help="Largest k per request.")] = 1000,
    max_body_bytes: Annotated[
        int | None,
        typer.Option(
            help="Largest request body in bytes, larger ones get 413 "
            "(default: max-batch x dimension x 32 + 65536).",
            show_default=False,
        ),
    ] = None,
    docs: Annotated[
        bool,
        typer.Option("--docs", help="Serve /docs and /redoc (these pages fetch their scripts from a CDN)."),
    ] = False,
    threads: Annotated[int, typer.Option(help="faiss threads per search (0: faiss's default).")] = 1,
    consistency: Annotated[
        str | None,
        typer.Option(
            help="A Milvus collection's read consistency: Strong, Bounded, Session or Eventually "
            f"(default {MILVUS_CONSISTENCY}).",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            help=f"Seconds a request waits for a Milvus server before a 503 (default {MILVUS_TIMEOUT_S:g}).",
            show_default=False,
        ),
    ] = None,
    allow_other_encoder: Annotated[
        bool,
        typer.Option(
            "--allow-other-encoder",
            help="Embed text queries even when the index's encoder now holds other weights than it recorded.",
        ),
    ] = False,
) -> None:
    """Serve POST /search and GET /health over the index in INDEX_DIR (a folder or a Milvus collection)."""
    raise typer.Exit(
        serve_command(
            index_dir,
            host=host,
            port=port,
            max_batch=max_batch,
            max_k=max_k,
            max_body_bytes=max_body_bytes,
            docs=docs,
            threads=threads,
            consistency=consistency,
            timeout=timeout,
            allow_other_encoder=allow_other_encoder,
        )
    )


def serve_command(
    index_dir: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_batch: int = 256,
    max_k: int = 1000,
    max_body_bytes: int | None = None,
    docs: bool = False,
    threads: int = 1,
    consistency: str | None = None,
    timeout: float | None = None,
    allow_other_encoder: bool = False,
) -> int:
    """Open the index (a bad folder or address is one line, exit 2), then run uvicorn until interrupted."""

    def body() -> int:
        # Deferred: faiss takes seconds to import, and `crl --help` does not need it.
        import faiss

        # Deferred: only serving needs uvicorn, and `crl --help` does not.
        import uvicorn

        if not 0 <= port <= 65535:
            raise ValueError(f"--port {port} is not a port number; pass 0..65535")
        if threads < 0:
            raise ValueError(f"--threads {threads}; pass 0 (faiss's default) or a positive count")
        if threads:
            faiss.omp_set_num_threads(threads)
        with stages_on_stderr():
            announce_import("importing fastapi and torch (a few seconds)", "fastapi")
            app = serving_app(
                index_dir,
                max_batch=max_batch,
                max_k=max_k,
                max_body_bytes=max_body_bytes,
                docs=docs,
                consistency=consistency,
                timeout=timeout,
                allow_other_encoder=allow_other_encoder,
            )
        uvicorn.run(app, host=host, port=port, log_level="info")
        return EXIT_OK

    return run_reporting_errors(body)


def serving_app(
    index_dir: str | Path,
    *,
    max_batch: int,
    max_k: int,
    max_body_bytes: int | None = None,
    docs: bool = False,
    consistency: str | None = None,
    timeout: float | None = None,
    allow_other_encoder: bool = False,
) -> FastAPI:
    """The app ``crl serve`` runs: the MiniLM string encoder registered, the index in ``index_dir`` (a folder, or
    a Milvus collection read at ``consistency`` with calls bounded by ``timeout`` seconds) opened and served by
    :func:`crl.serving.service.create_app` (the limits named as the command's options; an encoder whose weights
    changed since the index was built is refused unless ``allow_other_encoder``)."""
    # Deferred: it loads torch, faiss and fastapi, which `crl --help` does not need.
    from crl.serving.service import create_app

    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.serving.text import register_text_search

    for option, value in (
        ("--max-batch", max_batch),
        ("--max-k", max_k),
        ("--max-body-bytes", max_body_bytes),
    ):
        if value is not None and value < 1:
            raise ValueError(f"{option} {value}; pass a positive integer")
    backend = open_backend(str(index_dir), consistency=consistency, timeout=timeout)
    register_text_search()
    return create_app(
        backend,
        max_batch=max_batch,
        max_k=max_k,
        max_body_bytes=max_body_bytes,
        docs=docs,
        allow_other_encoder=allow_other_encoder,
    )


def open_backend(location: str, *, consistency: str | None, timeout: float | None) -> SearchBackend:
    """The index at ``location``: a Milvus collection for ``milvus://...`` (``consistency`` and ``timeout``
    default to :data:`MILVUS_CONSISTENCY` and :data:`MILVUS_TIMEOUT_S`), else the folder's saved index.

    Raises:
        ValueError: when ``consistency`` or ``timeout`` is given for a folder (they are a Milvus collection's).
    """
    if location.startswith("milvus://"):
        # Deferred: it loads faiss (and pymilvus on use), which `crl --help` does not need.
        from crl.search.milvus import MilvusIndex

        return MilvusIndex.connect(
            location,
            consistency=consistency or MILVUS_CONSISTENCY,
            timeout=MILVUS_TIMEOUT_S if timeout is None else timeout,
        )
    # Deferred: it loads faiss, which `crl --help` does not need.
    from crl.search import Index

    for option, value in (("--consistency", consistency), ("--timeout", timeout)):
        if value is not None:
            raise ValueError(f"{option} applies to a Milvus collection (milvus://...); drop it for a folder")
    return Index.load(Path(location))
