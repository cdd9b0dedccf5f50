"""The pilot's cells: their cost formula, the recipe map they train by, the cell config, and the stated wall time."""

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crl.advise.heldout import EvalSizes
from crl.advise.pilot import cell_document, cell_samples, pilot_cells, pilot_config, run_pilot, shape_of
from crl.advise.session import AdviseOptions, Plan, plan_session
from crl.sweep import SweepStore
from crl.train.config import LockedData, TrainConfig, parse_config
from crl.train.locked import TrainShape, batch_for, locked_split, train_shape
from crl.train.locked_heldout import load_heldout

FASHION = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
needs_fashion = pytest.mark.skipif(
    not FASHION.is_file(), reason="Fashion-MNIST (dataset-fashion-mnist) is not installed"
)


def _config(negatives: str = "shared_pool", m: int = 8, symmetric: bool = False, batch: int = 16):
    return parse_config(
        {
            "data": {"source": "synthetic", "dim": 4, "n_train": 4096, "batch_size": batch},
            "model": {"encoder": "mlp", "hidden": [8], "embedding_dim": 4},
            "loss": {
                "negatives": negatives,
                "n_negatives": 0 if negatives == "in_batch" else m,
                "symmetric": symmetric,
            },
            "optim": {"total_steps": 40, "warmup_steps": 10},
        }
    )


@pytest.mark.parametrize(
    ("negatives", "symmetric", "per_step"),
    [
        ("shared_pool", False, 2 * 16 + 10),
        ("shared_pool", True, 2 * 16 + 2 * 10),
        ("independent_pool", False, 2 * 16 + 16 * 10),
        ("queue", False, 2 * 16),
        ("in_batch", False, 2 * 16 + 10),
        ("mined", False, 2 * 16 + 16 * 10),
    ],
)
def test_cell_samples_count_every_encoded_input(negatives: str, symmetric: bool, per_step: int) -> None:
    """2b anchors and positives per step, plus the negatives that step embeds (m, 2m symmetric, b m, 0); at
    n = 4096, b = 16 the recipe map gives E floor(4096 / 16) = 256 E steps."""
    assert cell_samples(_config(negatives, symmetric=symmetric), 4096, 10, epochs=2) == 2 * 256 * per_step


def test_fixed_sets_embed_at_most_their_candidates_per_step() -> None:
    """SCRL's fixed sets: a step embeds the union of the batch's sets, at most the n candidates (b m = 160 > 136),
    and b m when that is fewer; fixed_pool embeds its m."""
    sets = _config("fixed_sets")
    assert cell_samples(sets, 136, 10, epochs=1) == 8 * (2 * 16 + 136)
    assert cell_samples(sets, 4096, 10, epochs=1) == 256 * (2 * 16 + 160)
    assert cell_samples(_config("fixed_pool"), 136, 10, epochs=1) == 8 * (2 * 16 + 10)


@given(n=st.integers(1, 200_000), epochs=st.integers(1, 20), cap=st.sampled_from([1, 8, 64, 256, 1000]))
def test_recipe_map_against_a_brute_force_search(n: int, epochs: int, cap: int) -> None:
    """b(n) is the largest power of two <= min(cap, n / 8) (found by counting up), steps E floor(n / b)."""
    batch = 1
    while 2 * batch <= min(cap, n // 8):
        batch *= 2
    assert train_shape(n, epochs, cap) == TrainShape(batch, epochs * max(1, n // batch), epochs)
    assert batch_for(n, cap) == batch


@given(n=st.integers(64, 100_000), epochs=st.integers(1, 20))
def test_doubling_n_keeps_the_epochs_and_doubles_the_pairs_processed(n: int, epochs: int) -> None:
    """The map's meaning: twice the pairs at the same E (pairs processed within one batch per epoch of E n); from
    n >= 8 cap the batch stays and the steps double (up to rounding), below it the batch doubles and the steps
    stay (up to rounding)."""
    cap = 256
    one, two = train_shape(n, epochs, cap), train_shape(2 * n, epochs, cap)
    assert one.epochs == two.epochs == epochs
    for shape, size in ((one, n), (two, 2 * n)):
        assert epochs * (size - shape.batch) < shape.pairs <= epochs * size
    if n >= 8 * cap:
        assert two.batch == one.batch == cap and two.steps in (2 * one.steps, 2 * one.steps + epochs)
    else:
        assert two.batch == 2 * one.batch and two.steps in range(one.steps - epochs, one.steps + epochs + 1)


def test_the_committed_grid_recipe_is_the_map() -> None:
    """The m*(n) grid's cells (E = 10, cap 256): 150 steps at n = 500..4,000, then 310 and 620 at the cap."""
    shapes = [train_shape(n, 10, 256) for n in (500, 1000, 2000, 4000, 8000, 16000)]
    assert [(s.batch, s.steps) for s in shapes] == [
        (32, 150),
        (64, 150),
        (128, 150),
        (256, 150),
        (256, 310),
        (256, 620),
    ]


@pytest.mark.parametrize(("name", "value"), [("n", 0), ("epochs", 0), ("cap", 0)])
def test_recipe_map_refuses_values_below_one(name: str, value: int) -> None:
    arguments = {"n": 100, "epochs": 1, "cap": 8, name: value}
    with pytest.raises(ValueError, match=f"{name} = 0 must be >= 1"):
        train_shape(**arguments)


def test_pilot_config_sets_n_m_and_the_maps_batch_and_steps_and_frees_in_batch_m() -> None:
    cell = pilot_config(_config("in_batch"), n=300, m=50, epochs=2, seed=3)
    assert (cell.data.n_train, cell.loss.n_negatives, cell.loss.negatives) == (300, 50, "shared_pool")
    shape = shape_of(_config(), 300, 2)
    assert (cell.data.batch_size, cell.optim.total_steps) == (shape.batch, shape.steps) == (16, 36)
    assert (cell.optim.warmup_steps, cell.run.seed, cell.loss.regime) == (9, 3, "shared")


def test_cell_document_reads_back_as_the_same_config() -> None:
    """The stored cell config keeps only non-default fields and the kinds, and parses back to the same config."""
    config = pilot_config(_config(), n=300, m=50, epochs=2, seed=3)
    document = cell_document(config)
    assert document["data"]["source"] == "synthetic" and document["model"]["encoder"] == "mlp"
    assert "beta1" not in document.get("optim", {})
    assert parse_config(document) == config


TINY = {
    "data": {"source": "synthetic", "truth": "vmf", "dim": 4, "kappa": 5.0, "n_train": 512, "batch_size": 16},
    "model": {"encoder": "mlp", "hidden": [8], "embedding_dim": 4},
    "loss": {"negatives": "shared_pool", "n_negatives": 8, "tau": 0.2},
    "optim": {"lr": 0.01, "total_steps": 10, "warmup_steps": 2},
}


def _timed_cells(config: TrainConfig, options: AdviseOptions, plan: Plan, store: Path) -> float:
    """Seconds to run the plan's pilot cells (no check cells) into a fresh store, in this process."""
    cells = pilot_cells(config, plan.points, plan.seeds, plan.epochs, plan.metric, options.sizes)
    start = time.perf_counter()
    with SweepStore(store) as opened:
        run_pilot(opened, cells)
    return time.perf_counter() - start


def _estimate(config: TrainConfig, plan: Plan) -> float:
    assert plan.probe is not None
    return plan.probe.wall_seconds(config, plan.points, len(plan.seeds), plan.epochs, workers=1)


def test_the_stated_wall_time_of_a_tiny_pilot_holds(tmp_path: Path, one_thread: None) -> None:
    """The probe's estimate of the cells against their time measured here (5 cells x 2 seeds, 4 epochs). The target
    is 2x; the bound is 3x, as this runs beside other work on shared cores."""
    config = parse_config(TINY)
    options = AdviseOptions(seeds=2, epochs=4, sizes=EvalSizes(queries=200))
    plan = plan_session(config, options)
    measured = _timed_cells(config, options, plan, tmp_path / "advise.sqlite")
    estimate = _estimate(config, plan)
    assert measured / 3 <= estimate <= 3 * measured, f"estimated {estimate:.2f} s, measured {measured:.2f} s"


@pytest.mark.slow
@needs_fashion
def test_on_locked_features_the_probe_makes_the_features_ready_and_its_estimate_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    """On locked features the probe makes every feature the cells will read (the training pairs up to the largest
    cell n, the test split) and caches it, so no cell computes a feature, and states the time it took
    (``feature_seconds``: the computation the first time, a read on the next plan). WordNet's plan once left out
    285 s of MiniLM features and counted the first evaluation's loading of the test split in every cell's
    evaluation (14.0 min stated for a 57 s pilot); here the cells' estimate must hold within 3x (target 2x)."""
    monkeypatch.setenv("CRL_CACHE_DIR", str(tmp_path / "cache"))
    load_heldout.cache_clear()
    config = parse_config(
        {
            "data": {"source": "locked", "dataset": "fashion_mnist", "backbone": "pixels", "n_train": 512},
            "model": {"encoder": "mlp", "hidden": [], "embedding_dim": 8},
            "loss": {"negatives": "fixed_pool", "n_negatives": 16, "form": "gcl"},
            "optim": {"total_steps": 10, "warmup_steps": 2},
        }
    )
    options = AdviseOptions(seeds=2, epochs=2, sizes=EvalSizes(queries=200), check=True)
    cold = plan_session(config, options)
    assert cold.probe is not None and cold.probe.feature_seconds > 0
    largest = pilot_config(config, 2 * 512, 16, 1).data
    assert locked_split(largest, "train").computed == 0, "the check cell (2N, M) would compute features"
    test = LockedData.model_validate({"dataset": "fashion_mnist", "backbone": "pixels"})
    assert locked_split(test, "test").computed == 0, "the first cell would compute the test split"
    measured = _timed_cells(config, options, cold, tmp_path / "advise.sqlite")
    estimate = _estimate(config, cold)
    assert measured / 3 <= estimate <= 3 * measured, f"estimated {estimate:.2f} s, measured {measured:.2f} s"
    load_heldout.cache_clear()
    warm = plan_session(config, options).probe
    assert warm is not None and warm.feature_seconds < cold.probe.feature_seconds
    load_heldout.cache_clear()
