"""``crl serve DIR``: the HTTP search service of :mod:`crl.serving.service` over a saved index, with uvicorn.

Text queries (``{"texts": [...]}``) of an index built from text (``crl index build minilm --text-file``) are
embedded by the MiniLM string encoder, registered here as ``crl search`` registers it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from crl.commands._errors import EXIT_OK, run_reporting_errors

if TYPE_CHECKING:
    from fastapi import FastAPI


def serve(
    index_dir: Annotated[Path, typer.Argument(help="A folder written by crl index build (or Index.save).")],
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
) -> None:
    """Serve POST /search and GET /health over the index in INDEX_DIR."""
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
        )
    )


def serve_command(
    index_dir: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_batch: int = 256,
    max_k: int = 1000,
    max_body_bytes: int | None = None,
    docs: bool = False,
    threads: int = 1,
) -> int:
    """Load the index (a bad folder is one line, exit 2), then run uvicorn until interrupted."""

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
        app = serving_app(
            index_dir, max_batch=max_batch, max_k=max_k, max_body_bytes=max_body_bytes, docs=docs
        )
        uvicorn.run(app, host=host, port=port, log_level="info")
        return EXIT_OK

    return run_reporting_errors(body)


def serving_app(
    index_dir: Path, *, max_batch: int, max_k: int, max_body_bytes: int | None = None, docs: bool = False
) -> FastAPI:
    """The app ``crl serve`` runs: the MiniLM string encoder registered, the index in ``index_dir`` loaded and
    served by :func:`crl.serving.service.create_app` (the limits named as the command's options)."""
    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.search import Index

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
    register_text_search()
    return create_app(
        Index.load(index_dir), max_batch=max_batch, max_k=max_k, max_body_bytes=max_body_bytes, docs=docs
    )
