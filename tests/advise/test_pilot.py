"""The pilot's cells: their cost formula, the recipe map they train by, and the cell config."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crl.advise.pilot import cell_document, cell_samples, pilot_config, shape_of
from crl.train.config import parse_config
from crl.train.locked import TrainShape, batch_for, train_shape


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
