"""Input checks run before anything reaches faiss (which raises RuntimeError or crashes on bad input)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from crl._validate import Integer, check

MAX_IP_NORM = 1e18
"""The largest vector norm an inner-product index takes: inner products of two such vectors are at most 1e36, and
the squared distances IVF-PQ takes between them at most 4e36, below float32's maximum 3.4e38."""


def as_matrix(x: Any, name: str, dim: int | None = None) -> np.ndarray:
    """``x`` as a C-contiguous float32 (n, d) array of finite numbers, d = ``dim`` when given.

    A torch tensor of a floating type numpy lacks (bfloat16, float8) is converted to float32 first.
    """
    torch = _torch_if_loaded()
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        x = (x.float() if x.is_floating_point() and x.dtype != torch.float64 else x).numpy()
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array (n, d), got shape {arr.shape}; pass one vector as {name}.reshape(1, -1)"
        )
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}; convert it to float32")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has dimension 0; vectors need at least one coordinate")
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(
            f"{name} has dimension {arr.shape[1]}, the index has {dim}; embed with the encoder that built the index"
        )
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(arr, dtype=np.float32)
    finite = np.isfinite(out).all(axis=1)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise ValueError(
            f"{name} row {row} holds NaN or inf (or a value beyond float32's range); drop or fix that row"
        )
    return out


def _torch_if_loaded() -> Any:
    """The torch module when some caller has imported it, else None: a tensor can only exist once torch is
    loaded, so the checks need not import it (a search of a saved index never loads torch)."""
    return sys.modules.get("torch")


def normalise(x: np.ndarray, name: str) -> np.ndarray:
    """The rows of ``x`` scaled to unit L2 norm, computed in float64 (a float32 norm of coordinates near
    float32's limits overflows or underflows); a zero row is an error (its cosine is undefined)."""
    wide = x.astype(np.float64)
    norms = np.linalg.norm(wide, axis=1, keepdims=True)
    if x.shape[0] and not (norms > 0).all():
        row = int(np.flatnonzero(norms[:, 0] <= 0)[0])
        raise ValueError(
            f"{name} row {row} is the zero vector, whose cosine is undefined; drop it or use metric='ip'"
        )
    return np.ascontiguousarray(wide / norms, dtype=np.float32)


def check_ip_norms(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` unchanged when every row's norm is at most :data:`MAX_IP_NORM`, so its inner products fit
    float32; otherwise a ``ValueError`` naming the first row beyond it."""
    norms = np.linalg.norm(x.astype(np.float64), axis=1)
    beyond = norms > MAX_IP_NORM
    if beyond.any():
        row = int(np.flatnonzero(beyond)[0])
        raise ValueError(
            f"{name} row {row} has norm {norms[row]:.3g}, above {MAX_IP_NORM:.0e}: its inner products could"
            " overflow float32; scale the vectors down (e.g. normalise them) or use metric='cosine'"
        )
    return x


def prepare(matrix: np.ndarray, metric: str, name: str) -> np.ndarray:
    """``matrix`` as an inner-product backend takes it: L2-normalised under ``"cosine"``, checked for overflow
    under ``"ip"``."""
    return normalise(matrix, name) if metric == "cosine" else check_ip_norms(matrix, name)


def as_ids(ids: Any, n: int, name: str = "ids") -> np.ndarray:
    """``ids`` as a 1-D int64 array of ``n`` distinct non-negative integers."""
    torch = _torch_if_loaded()
    if torch is not None and isinstance(ids, torch.Tensor):
        ids = ids.detach().cpu().numpy()
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}; pass one id per vector")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be integers, got dtype {arr.dtype}; pass int64 ids")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries for {n} vectors; pass exactly one id per vector")
    if arr.size and arr.dtype.kind == "u" and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{name} holds {int(arr.max())}, beyond int64; use ids below 2**63")
    out = arr.astype(np.int64)
    if out.size and int(out.min()) < 0:
        raise ValueError(f"{name} holds {int(out.min())}; ids must be >= 0 (-1 marks an empty result slot)")
    unique, counts = np.unique(out, return_counts=True)
    if (counts > 1).any():
        raise ValueError(f"{name} holds {int(unique[counts > 1][0])} more than once; ids must be distinct")
    return out


def check_k(k: Any, n: int) -> int:
    """``k`` as an int with 1 <= k <= n (the index's item count)."""
    k = check("k", k, Integer(1))
    if n == 0:
        raise ValueError("the index is empty; add vectors (index.add) before searching")
    if k > n:
        raise ValueError(f"k = {k} exceeds the {n} items of the index; pass k <= {n}")
    return k


def as_metadata(metadata: Sequence[dict[str, Any] | None] | None, n: int) -> list[dict[str, Any] | None]:
    """``metadata`` as a list of ``n`` JSON-able dicts (or None), one per vector."""
    if metadata is None:
        return [None] * n
    if isinstance(metadata, dict | str | bytes) or not isinstance(metadata, Sequence):
        raise ValueError("metadata must be a list with one dict (or None) per vector")
    if len(metadata) != n:
        raise ValueError(f"metadata has {len(metadata)} entries for {n} vectors; pass one per vector")
    for row, item in enumerate(metadata):
        if item is None:
            continue
        if not isinstance(item, dict) or not all(isinstance(key, str) for key in item):
            raise ValueError(
                f"metadata[{row}] must be a dict with str keys or None, got {type(item).__name__}"
            )
        try:
            json.dumps(item, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"metadata[{row}] is not JSON-able ({err}); keep to str, numbers, lists, dicts"
            ) from err
    return list(metadata)
