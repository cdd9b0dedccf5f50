"""A disk cache of frozen features: both sides of each pair, computed once by a backbone, reused while the key holds.

Locked-feature training (``[data] source = "locked"``) trains only a head on features that a frozen backbone
(MiniLM, raw pixels, a CNN checkpoint) computed once. Computing them can take minutes (MiniLM on 117k WordNet
definitions: 15-25 CPU-minutes), so they are kept under ``$CRL_CACHE_DIR/features`` (default
``~/.cache/crl/features``), one folder per :class:`FeatureKey`:

- the key is the model's name, the SHA-256 of the backbone's weights, the data set, the split, and every option
  that changes a feature (the split's seed and fractions, the text length, the views' seed, a SHA-256 of the
  split's own data); the folder is named by a SHA-256 of the whole key, and the manifest repeats the key, so a key
  that changed in any part (new weights, other data, another option) never reuses old features;
- the folder holds ``features-<K>.safetensors`` (``x`` (K, D_x) and ``y`` (K, D_y) float32: the anchor and
  positive features of the split's first K items) and ``manifest.json`` (the key, K, the file's name and SHA-256);
- a read is a hit when the manifest's key equals the key, K covers the rows asked for, and the file's SHA-256
  matches; a hit never recomputes. Anything else is a miss (a damaged file with a warning);
- a miss computes only what is missing: the rows from K on (or from 0), in aligned blocks of :data:`BLOCK` items,
  so an item's features never depend on how many were asked for, and stores the longer prefix;
- every file is written to a temporary, fsync'ed and renamed (:func:`crl._lock.write_atomically`), the features
  before the manifest, so an interrupted write leaves the previous entry (or none) intact: a reader sees the old
  manifest and its old file, or no manifest at all, never a half-written one. Files of shorter prefixes are
  removed after the manifest names the new one.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes
from torch import Tensor

from crl._cache import default_cache_dir
from crl._lock import write_atomically

__all__ = [
    "BLOCK",
    "FEATURE_FORMAT",
    "MANIFEST",
    "FeatureCache",
    "FeatureKey",
    "Features",
    "cached_features",
    "default_feature_dir",
]

FEATURE_FORMAT = 1
"""The version of the cache's layout and of crl's feature definitions; a change makes every old key stale."""

BLOCK = 64
"""Items per aligned block of computation: features are computed for items [k B, (k + 1) B) at a time."""

MANIFEST = "manifest.json"

_FILE = re.compile(r"^features-(\d+)\.safetensors$")


def default_feature_dir() -> Path:
    """``$CRL_CACHE_DIR/features``, else ``~/.cache/crl/features``."""
    return default_cache_dir() / "features"


@dataclass(frozen=True)
class FeatureKey:
    """What fixes a set of features: any change to a field is another key.

    Attributes:
        model: the backbone's name (``all-MiniLM-L6-v2``, ``pixels``, ``cnn``).
        weights_sha256: SHA-256 of the backbone's weights (of a fixed string for a backbone without weights).
        dataset: the data set (``wordnet``, ``bible``, ``fashion_mnist``).
        split: the split (``train``, ``test``).
        options: every other setting that changes a feature, as strings (the data's own SHA-256 among them).
    """

    model: str
    weights_sha256: str
    dataset: str
    split: str
    options: dict[str, str] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        """The key as JSON (the manifest's ``key``)."""
        return {
            "format": FEATURE_FORMAT,
            "model": self.model,
            "weights_sha256": self.weights_sha256,
            "dataset": self.dataset,
            "split": self.split,
            "options": dict(sorted(self.options.items())),
        }

    def digest(self) -> str:
        """SHA-256 of the canonical JSON of :meth:`document`."""
        text = json.dumps(self.document(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def folder_name(self) -> str:
        """``<dataset>-<split>-<model>-<digest[:16]>``, the model's name made safe for a folder."""
        model = re.sub(r"[^A-Za-z0-9._-]+", "_", self.model)[:40]
        return f"{self.dataset}-{self.split}-{model}-{self.digest()[:16]}"


@dataclass(frozen=True)
class Features:
    """The anchor features x (K, D_x) and positive features y (K, D_y) of K items, float32."""

    x: Tensor
    y: Tensor

    def __post_init__(self) -> None:
        if self.x.dim() != 2 or self.y.dim() != 2 or self.x.shape[0] != self.y.shape[0]:
            raise ValueError(
                f"features need x (K, D_x) and y (K, D_y) with one row per item, got {tuple(self.x.shape)} and "
                f"{tuple(self.y.shape)}"
            )

    @property
    def count(self) -> int:
        """K, the items."""
        return int(self.x.shape[0])

    def head(self, count: int) -> Features:
        """The first ``count`` items."""
        return Features(self.x[:count], self.y[:count])


class FeatureCache:
    """The feature folders under ``root`` (default :func:`default_feature_dir`)."""

    def __init__(self, root: str | Path = "") -> None:
        self.root = Path(root) if str(root) else default_feature_dir()

    def folder(self, key: FeatureKey) -> Path:
        """The folder of ``key``."""
        return self.root / key.folder_name()

    def read(self, key: FeatureKey) -> Features | None:
        """Every cached row of ``key``, or ``None`` (no entry, another key, or a damaged file: with a warning)."""
        folder = self.folder(key)
        manifest = _read_manifest(folder / MANIFEST)
        if manifest is None or manifest.get("key") != key.document():
            return None
        path = folder / str(manifest.get("file", ""))
        try:
            payload = path.read_bytes()
        except OSError:
            warnings.warn(
                f"feature cache {str(folder)!r}: {path.name} is missing; computing again", stacklevel=2
            )
            return None
        if hashlib.sha256(payload).hexdigest() != manifest.get("sha256"):
            warnings.warn(
                f"feature cache {str(folder)!r}: {path.name} does not match its manifest's SHA-256 (damaged or "
                "changed); computing again",
                stacklevel=2,
            )
            return None
        try:
            tensors = load_safetensors_bytes(payload)
            features = Features(tensors["x"], tensors["y"])
        except (SafetensorError, KeyError, ValueError) as error:
            warnings.warn(f"feature cache {str(folder)!r}: {path.name} is unreadable ({error})", stacklevel=2)
            return None
        return features if features.count == manifest.get("count") else None

    def write(self, key: FeatureKey, features: Features) -> Path:
        """Store ``features`` as the entry of ``key`` (atomically: the file, then the manifest); returns the file.

        Files of shorter prefixes of the key are removed once the manifest names the new one.
        """
        folder = self.folder(key)
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {
            "x": features.x.detach().float().contiguous(),
            "y": features.y.detach().float().contiguous(),
        }
        payload = save_safetensors_bytes(tensors, metadata={"count": str(features.count)})
        path = folder / f"features-{features.count}.safetensors"
        write_atomically(path, payload)
        manifest = {
            "key": key.document(),
            "count": features.count,
            "file": path.name,
            "sha256": hashlib.sha256(payload).hexdigest(),
            "x_shape": list(tensors["x"].shape),
            "y_shape": list(tensors["y"].shape),
        }
        write_manifest(folder / MANIFEST, manifest)
        for old in folder.iterdir():
            found = _FILE.match(old.name)
            if found is not None and int(found.group(1)) < features.count:
                old.unlink(missing_ok=True)
        return path


def write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    """Write a manifest atomically (a module-level function, so a test can interrupt it)."""
    write_atomically(path, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def _read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        warnings.warn(
            f"feature cache manifest {str(path)!r} is unreadable ({error}); computing again", stacklevel=3
        )
        return None
    return document if isinstance(document, dict) else None


Compute = Callable[[int, int], Features]
"""``compute(start, stop)``: the features of items start..stop-1 (start a multiple of :data:`BLOCK`)."""


def cached_features(
    cache: FeatureCache, key: FeatureKey, count: int, total: int, compute: Compute
) -> tuple[Features, int]:
    """The features of the first ``count`` of ``total`` items: a hit reads them, a miss computes the missing rows.

    A miss computes items K..K' - 1 in aligned blocks of :data:`BLOCK` (K the rows already cached, 0 without an
    entry; K' = ``count`` rounded up to a whole block, at most ``total``), stores the prefix of K' items and
    returns the first ``count``.

    Returns:
        (features of ``count`` items, the number of items computed now: 0 on a hit).

    Raises:
        ValueError: if ``count`` is not in 1..total.
    """
    if not 1 <= count <= total:
        raise ValueError(
            f"asked for the features of {count} items of a split of {total}; ask for 1 to {total}"
        )
    cached = cache.read(key)
    if cached is not None and cached.count >= count:
        return cached.head(count), 0
    start = 0 if cached is None else cached.count - cached.count % BLOCK
    stop = min(total, -(-count // BLOCK) * BLOCK)
    parts = [] if cached is None else [cached.head(start)]
    for block in range(start, stop, BLOCK):
        parts.append(compute(block, min(block + BLOCK, stop)))
    features = Features(torch.cat([p.x for p in parts]), torch.cat([p.y for p in parts]))
    cache.write(key, features)
    return features.head(count), stop - start
