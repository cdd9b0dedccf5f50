"""Where a claim runs: the fidelity, the code fingerprint that namespaces stored cells, and the claim context."""

import enum
import functools
import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crl.sweep import Cell, CellFn, CellRecord, Executor, ProgressHook, SweepStore, derive_seed, run_cells


@functools.cache
def code_fingerprint() -> str:
    """SHA-256 (first 16 hex digits) of every Python source file of the installed crl package.

    Stored cells are namespaced by it, so a rerun reuses only cells computed by exactly this code: an interrupted
    run resumes, but a changed estimator or claim never silently reuses results of the old one.
    """
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class Fidelity(enum.StrEnum):
    """How much computation a run of the claims spends (``crl verify --fidelity``)."""

    QUICK = "quick"
    STANDARD = "standard"
    FULL = "full"

    @property
    def budget_s(self) -> float | None:
        """Wall-time budget of a whole run of all claims on 2 cores (None: unbounded)."""
        return {"quick": 180.0, "standard": 1200.0, "full": None}[self.value]


@dataclass
class ClaimContext:
    """What a claim's ``run`` gets from `crl verify`: fidelity, store, seed, and the run's bookkeeping.

    Attributes:
        claim_id: the running claim's id (cells are stored under it).
        fidelity: how much to compute.
        store: the sweep store of this run's output folder.
        seed: the run's base seed (``crl verify --seed``).
        run_id: the current run's id.
        workers: process-pool size for cells (1: in process).
        executor: where the cells are computed, instead of ``workers`` (e.g. a Ray cluster,
            :class:`crl.sweep.ray_executor.RayExecutor`); this process stores them either way.
        progress: progress hook for the cells (``progress(done, total)``).
        cell_runs: run id -> number of cells used from that run, filled by :meth:`run_cells`.
        level: the per-part confidence level: every interval and violation count of the claim's rule, and its
            control, are judged at it. `crl verify` sets ``part_level(claim.parts)`` = 1 - 0.05/(10 parts)
            (docs/theory.md section 7: alpha = 0.05 over C1-C10, alpha/10 per claim, split over its parts).
    """

    claim_id: str
    fidelity: Fidelity
    store: SweepStore
    seed: int
    run_id: str
    workers: int = 1
    progress: ProgressHook | None = None
    cell_runs: Counter[str] = field(default_factory=Counter)
    level: float = field(kw_only=True)
    executor: Executor | None = field(default=None, kw_only=True)

    def run_cells(self, cells: Sequence[Cell], fn: CellFn) -> list[CellRecord]:
        """Compute (or load) the claim's cells with :func:`crl.sweep.run_cells`; records in ``cells`` order.

        Claim and control cells share the claim's namespace in the store, so their params must differ (e.g.
        ``{"arm": "control", ...}``). The namespace is ``"<claim id>@<code fingerprint>"`` (see
        :func:`code_fingerprint`): cells computed by other code are never reused.
        """
        records = run_cells(
            self.store,
            f"{self.claim_id}@{code_fingerprint()}",
            cells,
            fn,
            run_id=self.run_id,
            workers=self.workers,
            executor=self.executor,
            progress=self.progress,
        )
        self.cell_runs.update(record.run_id for record in records)
        return records

    def seed_for(self, *keys: Any) -> int:
        """A seed for this claim derived from the run's seed and JSON-able ``keys`` (e.g. a cell's params)."""
        return derive_seed(self.seed, self.claim_id, *keys)

    def rng(self, *keys: Any) -> np.random.Generator:
        """A numpy Generator seeded with :meth:`seed_for` of ``keys`` (e.g. ``ctx.rng("bootstrap")``)."""
        return np.random.default_rng(self.seed_for(*keys))
