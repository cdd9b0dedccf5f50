"""The on-disk layout of a saved index: faiss's own index file, the ids, the metadata and a JSON manifest.

A folder holds ``index.faiss`` (``faiss.write_index``), ``ids.npy`` (int64, no pickle), ``metadata.json``
(``{"<id>": {...}}``) and ``manifest.json`` (format, dimension, metric, kind, parameters, item count, the
sha256 of each of the three files, the encoder's provenance). Each file is written to a temporary name and
moved into place with ``os.replace``; the manifest goes last.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faiss
import numpy as np

FORMAT = "crl.search.index/1"
INDEX_FILE = "index.faiss"
IDS_FILE = "ids.npy"
METADATA_FILE = "metadata.json"
MANIFEST_FILE = "manifest.json"
DATA_FILES = (INDEX_FILE, IDS_FILE, METADATA_FILE)
MANIFEST_KEYS = ("format", "dimension", "metric", "kind", "params", "count", "sha256", "encoder")


def sha256(path: Path) -> str:
    """The hex SHA-256 of the file at ``path``."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Run ``write(tmp)`` on a temporary path beside ``path``, then move it onto ``path`` in one step."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_ids(ids: np.ndarray) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        with tmp.open("wb") as handle:
            np.save(handle, ids, allow_pickle=False)

    return write


def _write_text(text: str) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    return write


def save_folder(
    folder: Path,
    index: faiss.Index,
    ids: np.ndarray,
    metadata: dict[int, dict[str, Any]],
    manifest: dict[str, Any],
) -> None:
    """Write the index, ids and metadata into ``folder``, then the manifest with their checksums."""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / INDEX_FILE, lambda tmp: faiss.write_index(index, str(tmp)))
    write_atomic(folder / IDS_FILE, _write_ids(ids))
    meta_text = json.dumps({str(key): value for key, value in metadata.items()}, allow_nan=False)
    write_atomic(folder / METADATA_FILE, _write_text(meta_text))
    full = {**manifest, "sha256": {name: sha256(folder / name) for name in DATA_FILES}}
    write_atomic(folder / MANIFEST_FILE, _write_text(json.dumps(full, indent=2) + "\n"))


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of ``folder``, after checking its format and that every data file matches its checksum."""
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise ValueError(f"{path} is missing: {folder} is not an index saved by Index.save")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); save the index again") from err
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} manifest; save the index again with Index.save")
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing:
        raise ValueError(f"{path} lacks the field {missing[0]!r}; save the index again")
    if not isinstance(manifest["sha256"], dict):
        raise ValueError(
            f"{path}: field 'sha256' = {manifest['sha256']!r} is not a dict; save the index again"
        )
    for name in DATA_FILES:
        data = folder / name
        if not data.is_file():
            raise ValueError(f"{data} is missing; restore it or save the index again")
        got, want = sha256(data), manifest["sha256"].get(name)
        if got != want:
            raise ValueError(
                f"{data} is corrupted or changed since it was saved: sha256 {got[:12]}... differs from"
                f" {path.name}'s {str(want)[:12]}...; restore the file or rebuild the index"
            )
    return manifest


def read_data(folder: Path) -> tuple[faiss.Index, np.ndarray, dict[int, dict[str, Any]]]:
    """The faiss index, ids and metadata of ``folder`` (its checksums already checked)."""
    try:
        index = faiss.read_index(str(folder / INDEX_FILE))
    except RuntimeError as err:
        raise ValueError(
            f"{folder / INDEX_FILE} is not a readable faiss index ({err}); rebuild the index"
        ) from err
    try:
        ids = np.load(folder / IDS_FILE, allow_pickle=False)
    except ValueError as err:
        raise ValueError(
            f"{folder / IDS_FILE} is not an int64 .npy array ({err}); rebuild the index"
        ) from err
    if ids.ndim != 1 or ids.dtype != np.int64:
        raise ValueError(
            f"{folder / IDS_FILE} holds {ids.dtype} {ids.shape}, not 1-D int64; rebuild the index"
        )
    raw = json.loads((folder / METADATA_FILE).read_text(encoding="utf-8"))
    return index, ids, {int(key): value for key, value in raw.items()}
