"""``crl search DIR QUERY...``: the k nearest items of an index (or a Milvus collection) to each query.

DIR is a folder written by ``crl index build`` or a Milvus collection, ``milvus://HOST:PORT/COLLECTION`` (the
optional extra crl[milvus]; text queries use the encoder the collection records). ``--filter`` restricts the
results to items whose metadata passes a filter in crl's filter language (:mod:`crl.search.filters`), given as
JSON.

A query that is an integer is an item id of the index (its stored vector is the query); any other query is a
string, embedded by the string encoder registered for the index's checkpoint (:mod:`crl.serving.queries`; a text
encoder provides one). ``--text`` reads every query as a string (the title "1984"), ``--id`` every query as an
item id. An id query's own item is left out of its results (``--include-self`` keeps it): k other items come
back. ``--json`` prints one JSON object per query instead of a table: ``query``, ``results``
(``id``, ``score``, ``metadata``), ``k``, ``found`` (how many results it holds) and ``shortfall`` (why found < k,
else null). The table is followed by ``found N of k: why`` when the index found fewer than k items. A k above the
index's item count is lowered to it, with a note on stderr, as a search engine shows all it has.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from crl.commands._console import output_console, print_note
from crl.commands._errors import EXIT_OK, EXIT_USAGE, print_error, run_reporting_errors, warnings_as_lines
from crl.commands._progress import announce_import, stages_on_stderr

if TYPE_CHECKING:
    from crl.search import Index
    from crl.search.milvus import MilvusIndex


def search(
    index_dir: Annotated[
        str,
        typer.Argument(
            help="A folder written by crl index build (or Index.save), or milvus://HOST:PORT/COLLECTION."
        ),
    ],
    queries: Annotated[
        list[str],
        typer.Argument(help="Item ids of the index, or strings (text indexes); integers are read as ids."),
    ],
    k: Annotated[int, typer.Option("--k", "-k", help="Results per query.")] = 10,
    as_text: Annotated[
        bool, typer.Option("--text", help='Read every query as text, "1984" included (not as an item id).')
    ] = False,
    as_id: Annotated[bool, typer.Option("--id", help="Read every query as an item id of the index.")] = False,
    exclude_self: Annotated[
        bool,
        typer.Option(
            "--exclude-self/--include-self",
            help="Leave an id query's own item out of its results (k other items come back).",
        ),
    ] = True,
    ef_search: Annotated[int | None, typer.Option(help="HNSW efSearch for this search.")] = None,
    nprobe: Annotated[int | None, typer.Option(help="IVF cells probed for this search.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per query.")] = False,
    filter_json: Annotated[
        str, typer.Option("--filter", help='Metadata filter as JSON, e.g. \'{"label": {"in": [1, 3]}}\'.')
    ] = "",
    allow_other_encoder: Annotated[
        bool,
        typer.Option(
            "--allow-other-encoder",
            help="Embed text queries even when the index's encoder now holds other weights than it recorded.",
        ),
    ] = False,
) -> None:
    """Search the index in INDEX_DIR for the k nearest items to each QUERY.

    An integer QUERY is an item id (its stored vector is the query), anything else is text; --text or --id
    forces one reading. An id query's own item is left out of its results unless --include-self.
    """
    raise typer.Exit(
        search_command(
            index_dir,
            queries,
            k=k,
            ef_search=ef_search,
            nprobe=nprobe,
            as_json=as_json,
            filter_json=filter_json,
            reading=_reading(as_text, as_id),
            exclude_self=exclude_self,
            allow_other_encoder=allow_other_encoder,
        )
    )


def search_command(
    index_dir: str | Path,
    queries: list[str],
    *,
    k: int = 10,
    ef_search: int | None = None,
    nprobe: int | None = None,
    as_json: bool = False,
    filter_json: str = "",
    reading: str = "auto",
    exclude_self: bool = True,
    allow_other_encoder: bool = False,
) -> int:
    """Run ``crl search``: print each query's results; 0, or 2 with one line for bad input.

    ``reading`` is how queries are read (``"auto"``: integers are item ids; ``"id"``; ``"text"``); with
    ``exclude_self`` an id query's own item is left out and k other items are returned. Text queries are refused
    when the index's encoder now holds other weights than it recorded, unless ``allow_other_encoder``.
    """

    def body() -> int:
        # Deferred: it loads faiss, which `crl --help` does not need.
        from crl.search import Index

        # Deferred: it loads faiss, which `crl --help` does not need (no torch: a query by id stays fast).
        from crl.serving.queries import query_items, query_vectors, search_others

        chosen = _parsed_filter(filter_json)
        _check_utf8(queries)
        items = query_items(queries, reading)  # type: ignore[arg-type]
        index: Index | MilvusIndex
        if str(index_dir).startswith("milvus://"):
            # Deferred: it loads faiss (and pymilvus on use), which `crl --help` does not need.
            from crl.search.milvus import MilvusIndex

            with stages_on_stderr():
                index = MilvusIndex.connect(str(index_dir))
        else:
            index = Index.load(Path(index_dir))
            _check_ids_present(index, queries, items, index_dir)
        size = len(index)
        wanted = clipped_k(k, size)
        with stages_on_stderr():
            if None in items:
                announce_import("importing torch and transformers for the text queries (a few seconds)")
                # Deferred: MiniLM loads torch and transformers, which only a text query needs.
                from crl.serving.text import register_text_search

                register_text_search()
            if str(index_dir).startswith("milvus://"):
                _check_milvus_k(
                    wanted, exclude_self and any(item is not None for item in items) and wanted < size
                )
            with warnings_as_lines():
                vectors = query_vectors(
                    index,
                    queries,
                    reading,  # type: ignore[arg-type]
                    allow_other_encoder=allow_other_encoder,
                )
        found = search_others(
            index,
            vectors,
            wanted,
            own_items=items if exclude_self else None,
            size=size,
            ef_search=ef_search,
            nprobe=nprobe,
            filter=chosen,
        )
        console = output_console()
        every = sorted({int(i) for i in found.ids.ravel() if i >= 0})
        metadata_of = dict(zip(every, index.metadata(every), strict=True))
        for query, ids, scores, count in zip(queries, found.ids, found.scores, found.found, strict=True):
            kept = [(int(i), float(s)) for i, s in zip(ids, scores, strict=True) if i >= 0]
            metadata = [metadata_of[i] for i, _ in kept]
            shortfall = found.shortfall if count < wanted else None
            if as_json:
                hits = [
                    {"id": i, "score": s, "metadata": meta}
                    for (i, s), meta in zip(kept, metadata, strict=True)
                ]
                answer = {
                    "query": query,
                    "results": hits,
                    "k": wanted,
                    "found": int(count),
                    "shortfall": shortfall,
                }
                typer.echo(json.dumps(answer, allow_nan=False))
                continue
            table = Table(title=f"query {query}")
            for column in ("rank", "id", "score", "metadata"):
                table.add_column(column, justify="right" if column != "metadata" else "left")
            for rank, ((item, score), meta) in enumerate(zip(kept, metadata, strict=True), start=1):
                table.add_row(str(rank), str(item), f"{score:.4f}", "" if meta is None else json.dumps(meta))
            console.print(table)
            if shortfall is not None:
                console.print(f"found {count} of {wanted}: {shortfall}", markup=False, highlight=False)
        return EXIT_OK

    return run_reporting_errors(body)


def _check_ids_present(
    index: Index, queries: list[str], items: list[int | None], index_dir: str | Path
) -> None:
    """Raise a ``ValueError`` naming the first id query whose item ``index`` lacks, the ids it holds and the flag
    that reads the query as text (the library's message names ``index.ids``, a Python attribute)."""
    held = index.ids
    for query, item in zip(queries, items, strict=True):
        if item is not None and item not in held:
            span = f"ids {int(held.min())} to {int(held.max())}" if held.size else "no ids"
            raise ValueError(
                f"item {item} is not in {index_dir} (its {held.size:,} items have {span}); pass one of its ids, "
                f"or --text to search the text {query!r}"
            )


def clipped_k(k: int, items: int) -> int:
    """``k`` lowered to ``items`` (with a note on stderr) when it asks for more results than the index holds; an
    empty index, or a k below 1, is left to the search to refuse."""
    if 1 <= items < k:
        print_note(f"k = {k} is more than the {items} items of the index; showing all {items}")
        return items
    return k


def _check_utf8(queries: list[str]) -> None:
    """Refuse a query holding bytes that are not UTF-8 (the shell passes them as lone surrogates)."""
    for position, query in enumerate(queries):
        try:
            query.encode("utf-8")
        except UnicodeEncodeError as error:
            byte = query[error.start].encode("utf-8", "surrogateescape")
            raise ValueError(
                f"query {position + 1} holds the byte {byte!r}, which is not UTF-8; pass UTF-8 text"
            ) from None


def _check_milvus_k(k: int, leaves_out: bool) -> None:
    """Refuse a k (as lowered to the collection's size) a Milvus collection cannot answer: above its largest, or
    at it when an id query's own item is left out (the search asks for k + 1)."""
    # Deferred: it loads pymilvus on use, which `crl --help` does not need.
    from crl.search.milvus import MAX_K

    largest = MAX_K - 1 if leaves_out else MAX_K
    if k > largest:
        why = " with an id query's own item left out (the search asks for k + 1)" if leaves_out else ""
        raise ValueError(
            f"-k {k}: a Milvus collection answers k <= {largest}{why}; pass -k {largest} or less"
            + (", or --include-self" if leaves_out else "")
        )


def _parsed_filter(text: str) -> dict[str, object] | None:
    """``--filter``'s JSON as a mapping, checked against the filter language and its limits
    (:func:`crl.search.filters.parse_filter`) before any index is opened; None when not given."""
    # Deferred: importing crl.search loads faiss, which `crl --help` does not need.
    from crl.search.filters import MAX_DEPTH, parse_filter

    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--filter is not JSON ({error.msg}); pass e.g. '{{\"label\": 3}}'") from None
    except RecursionError:
        raise ValueError(
            f"--filter nests too deep for JSON's reader; a filter nests at most {MAX_DEPTH} levels, e.g. "
            '\'{"label": {"in": [1, 3]}}\''
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"--filter must be a JSON object {{field: condition}}, got {type(value).__name__}")
    try:
        parse_filter(value)
    except ValueError as error:
        raise ValueError(f"--filter: {error}") from None
    return value


def _reading(as_text: bool, as_id: bool) -> str:
    """How ``--text`` / ``--id`` read the queries: "text", "id", or "auto" (integers are ids) for neither."""
    if as_text and as_id:
        print_error("--text and --id contradict each other; pass one of them (or neither: integers are ids)")
        raise typer.Exit(EXIT_USAGE)
    return "text" if as_text else "id" if as_id else "auto"
