"""The fingerprint of a run's training data: what it was trained on, kept in the run folder's ``data.json``.

A resume must continue the same run, on the same data. The config alone cannot tell (``[data] path`` may name a
file that has since changed, and the Fashion-MNIST root may hold other files), so the trainer records the data
itself: the source kind, n, and for each array of the source (x, y and labels of paired arrays; the images and
labels of two-view image pairs; the features of every item and their keys for locked features) its shape, dtype
and a SHA-256 of its bytes; a text source's training pairs (query, positive, group, negatives) as one SHA-256
(``pairs``); and the file a source reads (``[data] path`` of your text pairs) by its absolute path and the
SHA-256 of its bytes (``file``), so ``crl eval`` reads the same file from any folder and refuses a changed one.
A resume whose fingerprint differs is refused with a message that names what differs (:func:`check_same_data`).

Hashing reads every byte once (about 0.5 s for the 188 MB of Fashion-MNIST's float32 training images); a source
of another type is fingerprinted by its sizes and input shapes only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from crl._lock import write_atomically
from crl.data import LockedFeaturePairs, PairedArrays, PairSource, TwoViewPairs
from crl.data.text import TextPair, TextPairSource

__all__ = [
    "DATA_FILE",
    "ArrayPrint",
    "DataFingerprint",
    "FilePrint",
    "check_same_data",
    "data_differences",
    "data_file_print",
    "fingerprint_source",
    "read_fingerprint",
    "text_fingerprint",
    "write_fingerprint",
]

DATA_FILE = "data.json"
"""The fingerprint's file in the run folder."""


@dataclass(frozen=True)
class ArrayPrint:
    """One array of the data: its name, shape, dtype and the SHA-256 of its bytes ('' when not hashed)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    sha256: str

    def describe(self) -> str:
        """``x (5000, 32) float32 sha256 ab12cd34ef56`` (the hash cut to 12 hex digits)."""
        digest = f" sha256 {self.sha256[:12]}" if self.sha256 else ""
        return f"{self.name} {self.shape} {self.dtype}{digest}"


@dataclass(frozen=True)
class FilePrint:
    """The file a source reads: its absolute path and the SHA-256 of its bytes."""

    path: str
    sha256: str


@dataclass(frozen=True)
class DataFingerprint:
    """What a run was trained on.

    Attributes:
        source: ``[data] source`` (arrays, fashion_mnist, digits, synthetic).
        n_pairs: n, the training pairs.
        arrays: the source's arrays, or its input shapes for a source of another type.
        file: the file the source reads (None for a source that names none).
    """

    source: str
    n_pairs: int
    arrays: tuple[ArrayPrint, ...]
    file: FilePrint | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``data.json``."""
        document: dict[str, Any] = {
            "source": self.source,
            "n_pairs": self.n_pairs,
            "arrays": [
                {"name": a.name, "shape": list(a.shape), "dtype": a.dtype, "sha256": a.sha256}
                for a in self.arrays
            ],
        }
        if self.file is not None:
            document["file"] = {"path": self.file.path, "sha256": self.file.sha256}
        return document

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> DataFingerprint:
        """Read back :meth:`to_dict`."""
        arrays = tuple(
            ArrayPrint(a["name"], tuple(a["shape"]), a["dtype"], a["sha256"]) for a in document["arrays"]
        )
        file = document.get("file")
        recorded = FilePrint(str(file["path"]), str(file["sha256"])) if file is not None else None
        return cls(str(document["source"]), int(document["n_pairs"]), arrays, recorded)


def _array_print(name: str, tensor: Tensor) -> ArrayPrint:
    values = tensor.detach().cpu().contiguous()
    digest = hashlib.sha256(values.view(-1).view(torch.uint8).numpy().data).hexdigest()
    return ArrayPrint(name, tuple(values.shape), str(values.dtype).removeprefix("torch."), digest)


def _pairs_print(pairs: list[TextPair]) -> ArrayPrint:
    """One SHA-256 over the texts of ``pairs`` (each pair's query, positive, group and negatives, in order)."""
    rows = [[p.query, p.positive, p.group, list(p.negatives)] for p in pairs]
    digest = hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode("utf-8")).hexdigest()
    return ArrayPrint("pairs", (len(pairs),), "text", digest)


def data_file_print(path: str | Path) -> FilePrint:
    """``path`` resolved to an absolute path and the SHA-256 of its bytes.

    Raises:
        ValueError: naming the path when it is not a readable file.
    """
    resolved = Path(path).resolve()
    if not resolved.is_file():
        raise ValueError(f"[data] path {resolved} is not a file; pass the file of your pairs")
    with resolved.open("rb") as handle:
        return FilePrint(str(resolved), hashlib.file_digest(handle, "sha256").hexdigest())


def _named_arrays(source: PairSource) -> dict[str, Tensor] | None:
    """The arrays that make the source's pairs, by name, or ``None`` for a source of another type."""
    if isinstance(source, PairedArrays):
        arrays = {"x": source.x, "y": source.y}
        return arrays if source.labels is None else {**arrays, "labels": source.labels}
    if isinstance(source, TwoViewPairs):
        return {"images": source.images.images, "labels": source.images.labels}
    if isinstance(source, LockedFeaturePairs):
        return {"x": source.items_x, "y": source.items_y, "keys": source.keys}
    return None


def fingerprint_source(kind: str, source: PairSource, file: FilePrint | None = None) -> DataFingerprint:
    """The fingerprint of ``source`` (``kind`` is its ``[data] source``; ``file`` the file it reads, if any)."""
    arrays = _named_arrays(source)
    prints: tuple[ArrayPrint, ...]
    if isinstance(source, TextPairSource):
        prints = (_pairs_print(source.texts),)
    elif arrays is None:
        prints = (
            ArrayPrint("x", (source.n_pairs, *source.anchor_shape), "?", ""),
            ArrayPrint("y", (source.n_pairs, *source.positive_shape), "?", ""),
        )
    else:
        prints = tuple(_array_print(name, tensor) for name, tensor in arrays.items())
    return DataFingerprint(kind, source.n_pairs, prints, file)


def text_fingerprint(kind: str, pairs: list[TextPair], file: FilePrint | None) -> DataFingerprint:
    """The fingerprint of a text source's training ``pairs`` (as :func:`fingerprint_source` makes it)."""
    return DataFingerprint(kind, len(pairs), (_pairs_print(pairs),), file)


def data_differences(saved: DataFingerprint, current: DataFingerprint) -> list[str]:
    """What differs between two fingerprints, one line each, e.g.
    ``x (5000, 32) float32 sha256 ab12cd34ef56 in the run folder, x (5000, 64) float32 sha256 90fe... now``."""
    lines = []
    if saved.source != current.source:
        lines.append(f"[data] source {saved.source!r} in the run folder, {current.source!r} now")
    old = {a.name: a for a in saved.arrays}
    new = {a.name: a for a in current.arrays}
    if (
        "pairs" in new and "pairs" not in old
    ):  # a text run folder recording only input shapes: nothing to compare
        new, old = {}, {}
    if saved.file is not None and current.file is not None and saved.file.sha256 != current.file.sha256:
        lines.append(
            f"[data] path {saved.file.path} sha256 {saved.file.sha256[:12]} in the run folder, "
            f"{current.file.path} sha256 {current.file.sha256[:12]} now"
        )
    for name in [*new, *(name for name in old if name not in new)]:
        before, after = old.get(name), new.get(name)
        if before != after:
            was = before.describe() if before is not None else f"no {name}"
            now = after.describe() if after is not None else f"no {name}"
            lines.append(f"{was} in the run folder, {now} now")
    return lines


def write_fingerprint(run_dir: Path, fingerprint: DataFingerprint) -> None:
    """Write ``run_dir/data.json`` (atomically, :func:`crl._lock.write_atomically`)."""
    document = json.dumps(fingerprint.to_dict(), indent=1) + "\n"
    write_atomically(run_dir / DATA_FILE, document.encode("utf-8"))


def read_fingerprint(run_dir: Path) -> DataFingerprint | None:
    """The fingerprint in ``run_dir/data.json``, or ``None`` for a run folder written before fingerprints."""
    path = run_dir / DATA_FILE
    if not path.is_file():
        return None
    return DataFingerprint.from_dict(json.loads(path.read_text(encoding="utf-8")))


def check_same_data(run_dir: Path, current: DataFingerprint) -> None:
    """Refuse to resume a run folder that was trained on other data.

    Raises:
        ValueError: naming each array that differs and the fix (a new run.name or --out).
    """
    saved = read_fingerprint(run_dir)
    if saved is None:
        return
    differences = data_differences(saved, current)
    if differences:
        raise ValueError(
            f"run folder {str(run_dir)!r} was trained on other data ({DATA_FILE}):\n  "
            + "\n  ".join(differences)
            + "\nresuming would mix two data sets; use a new run.name or --out (or delete that folder)"
        )
