"""Where a claim runs: the fidelity, the code fingerprint that namespaces stored cells, and the claim context."""

import ast
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


def _module_files(name: str, root: Path) -> list[Path]:
    """The files that importing ``name`` (``<top>.a.b``, the top package at ``root``) executes and that exist: each
    package's ``__init__.py`` on the way, and ``a/b.py`` or ``a/b/__init__.py`` (none when ``b`` is not a module)."""
    parts = name.split(".")[1:]
    files = [root.joinpath(*parts[:depth], "__init__.py") for depth in range(len(parts) + 1)]
    files.append(root.joinpath(*parts).with_suffix(".py"))
    return [path for path in files if path.is_file()]


def _imported_names(path: Path, module: str, top: str) -> list[str]:
    """Dotted names of the ``top``-package modules that ``path`` (module ``module``) may import: every import
    statement in it, also those inside functions; ``from m import x`` names both m and m.x (x may be a module)."""
    names: list[str] = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names.append(base)
            names.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return [name for name in names if name == top or name.startswith(f"{top}.")]


def import_closure(module: str, root: Path) -> list[Path]:
    """The source files of ``module`` and of every module of its top package that it imports, directly or through
    others (read statically, conservatively: an import inside a function counts), sorted.

    Args:
        module: a dotted module name, e.g. ``crl.claims.c06_saturation``.
        root: the directory of its top package (``crl``'s own directory for crl).
    """
    top = module.split(".")[0]
    seen: dict[Path, str] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        for path in _module_files(name, root):
            if path not in seen:
                relative = path.relative_to(root).with_suffix("")
                owner = ".".join((top, *relative.parts))
                seen[path] = owner[: -len(".__init__")] if owner.endswith(".__init__") else owner
                pending.extend(_imported_names(path, seen[path], top))
    return sorted(seen)


@functools.cache
def code_fingerprint(module: str | None = None) -> str:
    """SHA-256 (first 16 hex digits) of the crl source files that ``module`` runs: its :func:`import_closure`
    (None: every Python source file of the installed crl package).

    Stored cells are namespaced by their claim module's fingerprint, so a rerun reuses only cells computed by exactly
    this code: an interrupted run resumes, a changed estimator or claim never silently reuses results of the old
    one, and an edit to code the claim does not import (another claim, the search service) does not stop its run
    from resuming.
    """
    root = Path(__file__).resolve().parents[1]
    return files_fingerprint(
        sorted(root.rglob("*.py")) if module is None else import_closure(module, root), root
    )


def files_fingerprint(paths: Sequence[Path], root: Path) -> str:
    """SHA-256 (first 16 hex digits) of each file's path relative to ``root`` and its bytes, in the given order."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class Fidelity(enum.StrEnum):
    """How much computation a run of the claims spends (``crl verify --fidelity``)."""

    QUICK = "quick"
    STANDARD = "standard"
    FULL = "full"

    @property
    def budget_s(self) -> float:
        """Wall-time budget of a whole run of all claims on 2 cores, 2 workers: quick 3 min, standard 20, full 2 h."""
        return {"quick": 180.0, "standard": 1200.0, "full": 7200.0}[self.value]


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
        module: the claim's module (``crl.claims.c06_saturation``): its cells are namespaced by the fingerprint of
            the code it imports (:func:`code_fingerprint`); None: of all of crl.
        seeds: the claim's seed count when it is not its design's (a committed table of an earlier design, re-judged
            by :mod:`crl.claims.replay`); None: the design's (:meth:`seeds_or`).
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
    module: str | None = field(default=None, kw_only=True)
    seeds: int | None = field(default=None, kw_only=True)

    def seeds_or(self, design: int) -> int:
        """The claim's seed count: :attr:`seeds` when set, else ``design`` (the fidelity's registered seeds)."""
        return design if self.seeds is None else self.seeds

    def run_cells(self, cells: Sequence[Cell], fn: CellFn) -> list[CellRecord]:
        """Compute (or load) the claim's cells with :func:`crl.sweep.run_cells`; records in ``cells`` order.

        Claim and control cells share the claim's namespace in the store, so their params must differ (e.g.
        ``{"arm": "control", ...}``). The namespace is ``"<claim id>@<code fingerprint>"`` (see
        :func:`code_fingerprint` of :attr:`module`): cells computed by other code are never reused.
        """
        records = run_cells(
            self.store,
            f"{self.claim_id}@{code_fingerprint(self.module)}",
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
