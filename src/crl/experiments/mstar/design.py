"""The design of [A]'s m*(n) experiment on locked features (docs/claims/C6_real.md): recipes, arms, grids, cells.

Each cell is one training run of ``crl.train.loop.train`` on a config built here (:func:`train_config`) and one
held-out score. A data set's *recipe* fixes everything but (arm, regime, n, m, seed); the *arms* say where the
negatives come from and how long a run trains:

- ``in_sample``: [A]'s ERM analogue. n training pairs of locked features, a linear head onto the sphere (one map
  for both sides) trained by the recipe map :func:`crl.train.locked.train_shape` (b = :func:`batch_for` (n)), the
  gcl L_hat at a fixed tau over every anchor's fixed m negatives drawn from the n training items (``[loss]
  negatives = "fixed_pool"`` for SSCRL, ``"fixed_sets"`` for SCRL: exact at every step, no cap, no moving
  average), E epochs of the data cursor: steps = E floor(n / b) (each epoch a fresh permutation, its last
  incomplete batch dropped), so the anchors processed, E b floor(n / b), are proportional to n up to less than one
  batch per epoch;
- ``disjoint``: the same, the negatives drawn from a pool of P = ``pool_ratio`` x n further items of the split,
  disjoint from the n training pairs (``[data] negatives_from = "disjoint"``), closer to [A]'s i.i.d. negatives;
- ``budget``: the same as in_sample but every run processes the same B anchors whatever n: steps = ceil(B / b);
- ``ablation_exact`` and ``ablation_cap`` (Fashion-MNIST, SSCRL only): the earlier experiment's model, an MLP
  784 -> 256 -> 64 trained on fresh augmented views of the first n images for a fixed 500 steps of 64 anchors,
  once with the exact L_hat over all m (fixed_pool) and once with the earlier cap (the moving average exists for
  shared negatives only, and the earlier SCRL knees lay below the cap, where it was exact already):
  ``shared_pool`` over a pool of the first m images, k = min(m, 64) negatives embedded per step and FastCLIP's
  moving average u_i (``estimator = "fastclip"``, gamma on the cosine schedule from 1 to 0.2 over the first half
  of the steps; gamma = 1 when m <= 64, where k = m and each step's loss is L_hat's own term).

m runs over m = max(1, round(f n)) for the grid's fractions f, plus its small absolute m below n, up to
m_max(n) = n in every arm and regime. A cell's seed depends on (seed index, data set, n) only, so both regimes,
every m and every arm of one seed share the initial weights and the data order, and the fixed sets (keyed hash of
the seed) are nested in m.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, cast

from crl._validate import check_choice
from crl._vocab import Regime
from crl.sweep import Cell, derive_seed
from crl.train.config import LockedData, TrainConfig, parse_config
from crl.train.locked import VIEWS, batch_for, train_shape

__all__ = [
    "ABLATION_CAP",
    "DATA_SETS",
    "FIDELITIES",
    "Arm",
    "DataName",
    "Grid",
    "Recipe",
    "backbone_cell",
    "batch_for",
    "claim_of",
    "grid_cells",
    "grid_of",
    "locked_data",
    "train_config",
]

DataName = Literal["wordnet", "fashion"]
Arm = Literal["in_sample", "disjoint", "budget", "ablation_exact", "ablation_cap"]
DATA_SETS: tuple[DataName, ...] = ("wordnet", "fashion")
ABLATION_CAP = 64
"""k_max of the earlier experiment: negatives embedded per step, the rest through the moving average."""

_NEGATIVES: dict[Regime, str] = {"shared": "fixed_pool", "independent": "fixed_sets"}


@dataclass(frozen=True)
class Recipe:
    """What a cell trains, apart from (arm, regime, n, m, seed).

    Attributes:
        source: ``"locked"`` (a head on a frozen backbone's features) or ``"fashion_mnist"`` (fresh views, the
            ablation).
        dataset, backbone, backbone_path: the locked source's ``[data]`` fields (the held-out features' too).
        hidden, dim, towers: the head, ``[model] encoder = "mlp"`` (hidden [] is linear), onto S^{dim-1}.
        tau: the fixed temperature of the gcl L_hat.
        lr, weight_decay, grad_clip: AdamW, warm-up over ``warmup`` of the steps, cosine decay to 0.
        batch: b, anchors per step.
    """

    source: Literal["locked", "fashion_mnist"]
    dataset: Literal["wordnet", "fashion_mnist"]
    backbone: Literal["minilm", "pixels", "cnn"]
    hidden: tuple[int, ...]
    dim: int
    towers: Literal["shared", "two"]
    tau: float
    lr: float
    batch: int
    backbone_path: str = ""
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    warmup: float = 0.1


RECIPES: dict[DataName, Recipe] = {
    "wordnet": Recipe("locked", "wordnet", "minilm", (), 128, "shared", tau=0.1, lr=1e-2, batch=256),
    "fashion": Recipe("locked", "fashion_mnist", "pixels", (), 64, "shared", tau=0.2, lr=1e-2, batch=256),
}
"""The main arms' recipe per data set: one linear head for both sides (``towers = "shared"``: in the WordNet pilot it
kept MiniLM's alignment of definitions and lemma lists, where two heads lost it), b at most 256 (:func:`batch_for`)."""

ABLATION = Recipe(
    "fashion_mnist",
    "fashion_mnist",
    "pixels",
    (256,),
    64,
    "shared",
    tau=0.2,
    lr=2e-3,
    batch=64,
    grad_clip=0.0,
)
"""The earlier experiment's cell: MLP 784 -> 256 -> 64 on fresh views, AdamW lr 2e-3, no gradient clipping."""


@dataclass(frozen=True)
class Grid:
    """One fidelity of one data set.

    Attributes:
        recipe: the main arms' recipe (its ``batch`` is the cap of :func:`batch_for`).
        ns: n of the in-sample arm (>= 6 values over >= 1.5 decades at full fidelity).
        fractions: m/n of the m grid; ``absolute``: small m added below n.
        seeds: seed indices 0..seeds-1.
        epochs: E of the in-sample and disjoint arms.
        disjoint_ns: n of the disjoint arm; its pool holds ``pool_ratio`` x n items.
        budget_ns, budget_anchors: n of the fixed-budget arm and its B anchors per run.
        ablation_ns, ablation_steps: n and steps (of 64 anchors) of the two ablation arms (Fashion only).
        n_test: held-out queries scored (0: the whole test split).
    """

    recipe: Recipe
    ns: tuple[int, ...]
    fractions: tuple[float, ...]
    absolute: tuple[int, ...]
    seeds: int
    epochs: int
    disjoint_ns: tuple[int, ...] = ()
    pool_ratio: int = 2
    budget_ns: tuple[int, ...] = ()
    budget_anchors: int = 0
    ablation_ns: tuple[int, ...] = ()
    ablation_steps: int = 500
    n_test: int = 0

    def m_values(self, n: int) -> tuple[int, ...]:
        """m = max(1, round(f n)) for each fraction f and the absolute m below n: distinct, increasing."""
        values = {max(1, round(f * n)) for f in self.fractions} | {m for m in self.absolute if m < n}
        return tuple(sorted(values))

    def with_seeds(self, seeds: int) -> Grid:
        """The same grid with seed indices 0..seeds-1 (the seed rule of docs/claims/C6_real.md may raise them)."""
        if seeds < 2:
            raise ValueError(
                f"--seeds {seeds} must be >= 2 (intervals over seeds), or 0 for the fidelity's seeds"
            )
        return replace(self, seeds=seeds)

    def up_to(self, n_max: int) -> Grid:
        """The same grid without the n above ``n_max`` in any arm (the seed rule's fallback: many seeds over a
        reduced n range, docs/claims/C6_real.md).

        Raises:
            ValueError: if fewer than 2 n of the in-sample arm remain.
        """
        kept = tuple(n for n in self.ns if n <= n_max)
        if len(kept) < 2:
            raise ValueError(
                f"--n-max {n_max} keeps {len(kept)} n of {list(self.ns)}; keep at least 2 (a slope needs two)"
            )

        def below(ns: tuple[int, ...]) -> tuple[int, ...]:
            return tuple(n for n in ns if n <= n_max)

        return replace(
            self,
            ns=kept,
            disjoint_ns=below(self.disjoint_ns),
            budget_ns=below(self.budget_ns),
            ablation_ns=below(self.ablation_ns),
        )


FRACTIONS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0)
SMALL_M = (1, 4, 16)


def _fidelities(recipe: Recipe, *, ablation: bool) -> dict[str, Grid]:
    """tiny, reduced and full of one data set: the same n, m and seed grids for both data sets; ``ablation`` adds
    the earlier experiment's two arms (Fashion-MNIST only) at tiny and full."""
    tiny_ablation: dict[str, Any] = {"ablation_ns": (64, 128), "ablation_steps": 4} if ablation else {}
    full_ablation: dict[str, Any] = {"ablation_ns": (500, 1000, 2000)} if ablation else {}
    return {
        "tiny": Grid(
            recipe,
            (64, 128, 256),
            (0.05, 0.25, 0.5, 1.0),
            (),
            2,
            2,
            disjoint_ns=(64, 128),
            budget_ns=(64, 256),
            budget_anchors=256,
            n_test=200,
            **tiny_ablation,
        ),
        "reduced": Grid(
            recipe,
            (500, 1000, 2000),
            FRACTIONS,
            (),
            3,
            10,
            disjoint_ns=(500, 1000),
            budget_ns=(500, 1000),
            budget_anchors=5000,
        ),
        "full": Grid(
            recipe,
            (500, 1000, 2000, 4000, 8000, 16000),
            FRACTIONS,
            SMALL_M,
            4,
            10,
            disjoint_ns=(1000, 4000),
            budget_ns=(1000, 8000),
            budget_anchors=40000,
            **full_ablation,
        ),
    }


FIDELITIES: dict[DataName, dict[str, Grid]] = {
    "wordnet": _fidelities(RECIPES["wordnet"], ablation=False),
    "fashion": _fidelities(RECIPES["fashion"], ablation=True),
}
"""The grids by data set and fidelity (docs/claims/C6_real.md: tiny for tests, reduced <= 20 min, full <= 8 h)."""


def grid_of(
    data: str, fidelity: str, *, seeds: int = 0, n_max: int = 0, backbone_path: str = ""
) -> tuple[DataName, Grid]:
    """The grid of ``--data`` and ``--fidelity``, with ``--seeds`` (0: the fidelity's), ``--n-max`` (0: every n)
    and ``--backbone-path`` (fashion: a crl CNN checkpoint instead of raw pixels; wordnet: a sentence-transformers
    folder).

    Raises:
        ValueError: naming the option and the values it takes.
    """
    named = cast(DataName, check_choice("--data", data, DATA_SETS))
    grid = FIDELITIES[named][check_choice("--fidelity", fidelity, tuple(FIDELITIES[named]))]
    if seeds:
        grid = grid.with_seeds(seeds)
    if n_max:
        grid = grid.up_to(n_max)
    if backbone_path:
        backbone: Literal["cnn", "minilm"] = "cnn" if grid.recipe.dataset == "fashion_mnist" else "minilm"
        grid = replace(grid, recipe=replace(grid.recipe, backbone=backbone, backbone_path=backbone_path))
    return named, grid


def claim_of(data: DataName) -> str:
    """The name the data set's cells are stored under in the sweep store."""
    return f"mstar-{check_choice('--data', data, DATA_SETS)}"


def _loss(arm: Arm, regime: Regime, m: int, steps: int, tau: float) -> dict[str, Any]:
    """``[loss]``: the exact gcl L_hat over a fixed pool or fixed sets, or the earlier cap (module docstring)."""
    if arm != "ablation_cap":
        return {"negatives": _NEGATIVES[regime], "n_negatives": m, "form": "gcl", "tau": tau}
    if regime != "shared":
        raise ValueError(
            "the ablation's cap (FastCLIP's moving average) exists for SSCRL only; use regime 'shared'"
        )
    capped = m > ABLATION_CAP
    return {
        "negatives": "shared_pool",
        "pool_size": m,
        "n_negatives": min(m, ABLATION_CAP),
        "form": "gcl",
        "tau": tau,
        "estimator": "fastclip",
        "gamma": 0.2 if capped else 1.0,
        "gamma_schedule": "cosine" if capped else "constant",
        "gamma_decay_steps": max(1, steps // 2) if capped else 0,
    }


def _data(recipe: Recipe, n: int, pool: int) -> dict[str, Any]:
    """``[data]``: the locked features of n pairs (and a disjoint pool of ``pool``), or fresh views of the first n
    images (``validation = 0``: the pre-registered ablation trains on them, as it did before validation images)."""
    if recipe.source == "fashion_mnist":
        return {
            "source": "fashion_mnist",
            "n_train": n,
            "batch_size": recipe.batch,
            "crop_scale_min": VIEWS.crop_scale[0],
            "max_shift": VIEWS.max_shift,
            "flip_p": VIEWS.flip_p,
            "erase_p": VIEWS.erase_p,
            "noise_std": VIEWS.noise_std,
            "validation": 0,
        }
    disjoint = {"negatives_from": "disjoint", "disjoint_size": pool} if pool else {}
    return {
        "source": "locked",
        "dataset": recipe.dataset,
        "backbone": recipe.backbone,
        "backbone_path": recipe.backbone_path,
        "n_train": n,
        "batch_size": recipe.batch,
        **disjoint,
    }


def train_config(params: Mapping[str, Any], seed: int) -> TrainConfig:
    """The training config of a cell's params (:func:`grid_cells`) with ``[run] seed = seed``.

    Raises:
        ConfigError: if the params make no valid config (naming the field).
    """
    recipe = Recipe(**{**params["recipe"], "hidden": tuple(params["recipe"]["hidden"])})
    steps = int(params["steps"])
    document = {
        "data": _data(recipe, int(params["n"]), int(params["pool"])),
        "model": {
            "encoder": "mlp",
            "hidden": list(recipe.hidden),
            "embedding_dim": recipe.dim,
            "towers": recipe.towers,
        },
        "loss": _loss(params["arm"], params["regime"], int(params["m"]), steps, recipe.tau),
        "optim": {
            "lr": recipe.lr,
            "weight_decay": recipe.weight_decay,
            "grad_clip": recipe.grad_clip,
            "total_steps": steps,
            "warmup_steps": math.floor(recipe.warmup * steps),
        },
        "run": {"seed": seed, "progress": False, "tensorboard": False},
    }
    return parse_config(document, source=f"m*(n) cell {params['arm']} {params['regime']} n = {params['n']}")


def _heldout(recipe: Recipe, n_test: int) -> dict[str, Any]:
    """The fixed test split a cell is scored on: the recipe's locked features (pixels for the ablation)."""
    backbone = recipe.backbone if recipe.source == "locked" else "pixels"
    path = recipe.backbone_path if recipe.source == "locked" else ""
    return {"dataset": recipe.dataset, "backbone": backbone, "backbone_path": path, "n_test": n_test}


@dataclass(frozen=True)
class _Run:
    """The training runs of one curve family: an arm at one n, its regimes, steps, disjoint pool and recipe."""

    arm: Arm
    regimes: tuple[Regime, ...]
    n: int
    steps: int
    pool: int
    recipe: Recipe


def _runs(grid: Grid) -> list[_Run]:
    """The runs of every curve of the grid: the in-sample and disjoint arms train by the recipe map
    (:func:`crl.train.locked.train_shape`), the budget arm at its batch for ceil(B / b) steps (module docstring)."""
    both: tuple[Regime, ...] = ("shared", "independent")
    main: tuple[tuple[Arm, tuple[int, ...]], ...] = (
        ("in_sample", grid.ns),
        ("disjoint", grid.disjoint_ns),
        ("budget", grid.budget_ns),
    )
    runs = []
    for arm, ns in main:
        for n in ns:
            shape = train_shape(n, grid.epochs, grid.recipe.batch)
            recipe = replace(grid.recipe, batch=shape.batch)
            steps = math.ceil(grid.budget_anchors / shape.batch) if arm == "budget" else shape.steps
            pool = grid.pool_ratio * n if arm == "disjoint" else 0
            runs.append(_Run(arm, both, n, steps, pool, recipe))
    ablations: tuple[Arm, ...] = ("ablation_exact", "ablation_cap")
    runs += [
        _Run(arm, ("shared",), n, grid.ablation_steps, 0, ABLATION)
        for arm in ablations
        for n in grid.ablation_ns
    ]
    return runs


def grid_cells(data: DataName, grid: Grid) -> list[Cell]:
    """The backbone baseline cell, then every (seed, arm, n, regime, m) cell: the in-sample arm seed by seed, then
    the other arms seed by seed, so that a stopped run holds whole seeds of the in-sample arm first (it carries the
    slopes of m*(n) and the advisor's check) and whole seeds of the others after; a cell's seed is
    derive_seed(seed index, "mstar", data set, n)."""
    cells = [backbone_cell(data, grid)]
    runs = _runs(grid)
    groups = (
        [run for run in runs if run.arm == "in_sample"],
        [run for run in runs if run.arm != "in_sample"],
    )
    for group, index in ((group, index) for group in groups for index in range(grid.seeds)):
        for run in group:
            seed = derive_seed(index, "mstar", data, run.n)
            for regime in run.regimes:
                for m in grid.m_values(run.n):
                    params = {
                        "data": data,
                        "arm": run.arm,
                        "regime": regime,
                        "n": run.n,
                        "m": m,
                        "steps": run.steps,
                        "pool": run.pool,
                        "recipe": asdict(run.recipe),
                        "heldout": _heldout(run.recipe, grid.n_test),
                    }
                    cells.append(Cell(params, seed))
    return cells


def locked_data(dataset: str, backbone: str, backbone_path: str, n_train: int = 0) -> LockedData:
    """``[data] source = "locked"`` of a data set and backbone (its other fields at their defaults).

    Raises:
        ValueError: for a backbone that does not fit the data set, naming the field.
    """
    return LockedData.model_validate(
        {"dataset": dataset, "backbone": backbone, "backbone_path": backbone_path, "n_train": n_train}
    )


def backbone_cell(data: DataName, grid: Grid) -> Cell:
    """The baseline: the held-out score of the backbone's own features, no head (nothing trained)."""
    return Cell({"data": data, "arm": "backbone", "heldout": _heldout(grid.recipe, grid.n_test)}, 0)
