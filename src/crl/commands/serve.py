"""``crl serve DIR``: the HTTP search service of :mod:`crl.search.service` over a saved index, with uvicorn."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from crl.commands._errors import EXIT_OK, run_reporting_errors


def serve(
    index_dir: Annotated[Path, typer.Argument(help="A folder written by crl index build (or Index.save).")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    max_batch: Annotated[int, typer.Option(help="Most queries per request.")] = 256,
    max_k: Annotated[int, typer.Option(help="Largest k per request.")] = 1000,
    threads: Annotated[int, typer.Option(help="faiss threads per search (0: faiss's default).")] = 1,
) -> None:
    """Serve POST /search and GET /health over the index in INDEX_DIR."""
    raise typer.Exit(
        serve_command(index_dir, host=host, port=port, max_batch=max_batch, max_k=max_k, threads=threads)
    )


def serve_command(
    index_dir: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_batch: int = 256,
    max_k: int = 1000,
    threads: int = 1,
) -> int:
    """Load the index (a bad folder is one line, exit 2), then run uvicorn until interrupted."""

    def body() -> int:
        import faiss
        import uvicorn

        from crl.search import Index
        from crl.search.service import create_app

        if not 0 <= port <= 65535:
            raise ValueError(f"--port {port} is not a port number; pass 0..65535")
        if threads < 0:
            raise ValueError(f"--threads {threads}; pass 0 (faiss's default) or a positive count")
        if threads:
            faiss.omp_set_num_threads(threads)
        app = create_app(Index.load(index_dir), max_batch=max_batch, max_k=max_k)
        uvicorn.run(app, host=host, port=port, log_level="info")
        return EXIT_OK

    return run_reporting_errors(body)
