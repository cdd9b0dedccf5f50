"""Running the m*(n) experiment: the locked features computed once, then the cells through the sweep engine.

:func:`prepare_features` computes (or finds in the feature cache) the features every cell of a grid reads: the
training split's first max(n + P) items and the whole test split, in this process, before any worker starts, so
that parallel workers only ever read the cache. :func:`run_experiment` computes the cells the store lacks under
the data set's claim name (:func:`crl.experiments.mstar.design.claim_of`), each committed the moment it finishes:
a stopped run continues where it stopped, and a grid with more seeds or n reuses every stored cell.
:func:`stored_records` reads the cells a store holds without computing any (an interim report of a long run), and
:func:`scrl_overlaps` measures the pairwise overlap of SCRL's sets at every (arm, n, m) of the grid (the first
seed's sets; the regimes coincide where it reaches 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crl.experiments.mstar.cell import cell_set_overlap, compute_cell
from crl.experiments.mstar.design import DataName, Grid, claim_of, grid_cells, locked_data
from crl.negatives.fixed import SetOverlap
from crl.sweep import (
    CellFn,
    CellRecord,
    Executor,
    ProgressHook,
    SweepStore,
    canonical_json,
    derive_seed,
    run_cells,
)
from crl.train.checkpoint import load_train_state, resolve_checkpoint
from crl.train.config import FashionMnistData
from crl.train.locked import locked_split

__all__ = [
    "FASHION_ITEMS",
    "ArmOverlap",
    "check_cnn_backbone",
    "prepare_features",
    "run_experiment",
    "scrl_overlaps",
    "stored_records",
]


def _largest_prefix(grid: Grid) -> int:
    """max(n + P) over the arms that train on locked features."""
    sizes = [*grid.ns, *grid.budget_ns, *((1 + grid.pool_ratio) * n for n in grid.disjoint_ns)]
    return max(sizes)


FASHION_ITEMS = 50_000
"""Fashion-MNIST training images 50,000-59,999 are kept out of every n and pool (a CNN backbone trains on them)."""


def check_cnn_backbone(path: str) -> None:
    """Refuse a CNN checkpoint that may have trained on the images the grid's n and pools use (0-49,999).

    Raises:
        ValueError: if the checkpoint's run did not train on Fashion-MNIST with ``[data] first_image`` >= 50,000.
    """
    data = load_train_state(resolve_checkpoint(path)).config.data
    if not isinstance(data, FashionMnistData) or data.first_image < FASHION_ITEMS:
        first = data.first_image if isinstance(data, FashionMnistData) else 0
        raise ValueError(
            f"--backbone-path {path}: its run trained on {data.source} images from index {first} on, which the "
            f'grid\'s n and pools use; train the CNN with [data] source = "fashion_mnist" and first_image = '
            f"{FASHION_ITEMS} (e.g. configs/fashion_backbone_cnn.toml)"
        )


def prepare_features(data: DataName, grid: Grid) -> int:
    """Compute the grid's missing locked features into the cache: the training split's first max(n + P) items and
    the test split of every held-out set the cells score on; returns the items computed now (0: all cached).

    Raises:
        ValueError: if a Fashion-MNIST grid reaches past image 50,000 (kept for the CNN backbone).
    """
    recipe = grid.recipe
    if recipe.dataset == "fashion_mnist" and recipe.backbone == "cnn":
        check_cnn_backbone(recipe.backbone_path)
    if recipe.dataset == "fashion_mnist" and _largest_prefix(grid) > FASHION_ITEMS:
        raise ValueError(
            f"the grid needs the first {_largest_prefix(grid)} Fashion-MNIST images (n + disjoint pool), past "
            f"{FASHION_ITEMS}: images 50,000-59,999 are kept for the CNN backbone; lower n or the pool"
        )
    prefix = locked_data(recipe.dataset, recipe.backbone, recipe.backbone_path, _largest_prefix(grid))
    computed = locked_split(prefix, "train").computed
    heldouts = {
        canonical_json(cell.params["heldout"]): cell.params["heldout"] for cell in grid_cells(data, grid)
    }
    for spec in heldouts.values():
        computed += locked_split(
            locked_data(spec["dataset"], spec["backbone"], spec["backbone_path"]), "test"
        ).computed
    return computed


def run_experiment(
    database: Path,
    data: DataName,
    grid: Grid,
    *,
    run_id: str,
    workers: int = 1,
    executor: Executor | None = None,
    progress: ProgressHook | None = None,
    compute: CellFn = compute_cell,
) -> list[CellRecord]:
    """Compute the cells of ``grid`` that the database lacks (each stored as it finishes) and return all records.

    Raises:
        ValueError: for an unknown data set or ``workers < 1``; whatever a cell raises (cells finished before it
            stay stored).
    """
    with SweepStore(database) as store:
        return run_cells(
            store,
            claim_of(data),
            grid_cells(data, grid),
            compute,
            run_id=run_id,
            workers=workers,
            executor=executor,
            progress=progress,
        )


def stored_records(database: Path, data: DataName, grid: Grid) -> list[CellRecord]:
    """The records of the grid's cells that ``database`` holds now, computing none (in the grid's order).

    Raises:
        ValueError: if there is no store at ``database``.
    """
    if not database.is_file():
        raise ValueError(f"no results store at {database}; run the experiment without --report-only first")
    with SweepStore(database) as store:
        found = (store.get(claim_of(data), cell) for cell in grid_cells(data, grid))
        return [record for record in found if record is not None]


@dataclass(frozen=True)
class ArmOverlap:
    """The overlap of SCRL's sets at one (arm, n, m): C candidates (n in-sample, the pool's P when disjoint)."""

    arm: str
    n: int
    m: int
    candidates: int
    overlap: SetOverlap


def scrl_overlaps(data: DataName, grid: Grid) -> list[ArmOverlap]:
    """:func:`crl.experiments.mstar.cell.cell_set_overlap` of every SCRL cell of the first seed in the in-sample
    and disjoint arms (the budget arm's sets are the in-sample arm's at the same n and seed)."""
    found = []
    for cell in grid_cells(data, grid):
        params = cell.params
        if (params.get("arm"), params.get("regime")) not in (
            ("in_sample", "independent"),
            ("disjoint", "independent"),
        ):
            continue
        if cell.seed != derive_seed(0, "mstar", data, int(params["n"])):
            continue
        pool = int(params["pool"])
        overlap = cell_set_overlap(params, cell.seed)
        found.append(
            ArmOverlap(params["arm"], int(params["n"]), int(params["m"]), pool or int(params["n"]), overlap)
        )
    return found
