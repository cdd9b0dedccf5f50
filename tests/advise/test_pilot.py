"""The pilot design: its cost formula, the budget rule, and the cell config."""

import pytest

from crl.advise.check import check_points
from crl.advise.pilot import (
    FRACTIONS,
    CellShape,
    PilotPoint,
    cell_samples,
    cell_shape,
    design_pilot,
    pilot_config,
)
from crl.train.config import parse_config


def _config(negatives: str = "shared_pool", m: int = 8, symmetric: bool = False):
    return parse_config(
        {
            "data": {"source": "synthetic", "dim": 4, "n_train": 4096, "batch_size": 16},
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
    """2b anchors and positives per step, plus the negatives that step embeds (m, 2m symmetric, b m, 0)."""
    assert cell_samples(_config(negatives, symmetric=symmetric), 10, steps=7) == 7 * per_step


def test_design_is_the_largest_that_fits_the_budget() -> None:
    config = _config()
    roomy = design_pilot(config, 10**9, n_full=4096)
    assert roomy.n_values == (256, 512, 1024, 2048)
    assert roomy.total_samples <= 10**9
    tight = design_pilot(config, roomy.total_samples - 1, n_full=4096)
    assert tight.n_values == (128, 256, 512, 1024)
    for n in tight.n_values:
        assert {p.m for p in tight.points if p.n == n} == {max(1, round(f * n)) for f in FRACTIONS}


def test_too_small_a_budget_names_the_option_and_the_minimum() -> None:
    with pytest.raises(ValueError, match=r"--budget 10 processed samples is too small.*needs \d+"):
        design_pilot(_config(), 10, n_full=4096)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"seeds": 1}, "--seeds"), ({"levels": 2}, "--levels"), ({"fractions": (0.1, 0.1, 1.0)}, "fractions")],
)
def test_bad_design_arguments_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        design_pilot(_config(), 10**9, n_full=4096, **kwargs)


def test_pilot_config_sets_n_m_steps_and_frees_in_batch_m() -> None:
    cell = pilot_config(_config("in_batch"), n=300, m=50, steps=20, seed=3)
    assert (cell.data.n_train, cell.loss.n_negatives, cell.loss.negatives) == (300, 50, "shared_pool")
    assert (cell.optim.total_steps, cell.optim.warmup_steps, cell.run.seed) == (20, 5, 3)
    assert cell.loss.regime == "shared"


def test_check_points_lie_beyond_the_pilot() -> None:
    points = check_points(1024, 60000, (0.01, 0.1, 0.4, 1.0))
    assert {p.n for p in points} == {2048, 4096}
    assert PilotPoint(2048, 2048) in points and len(points) >= 6
    assert all(p.m <= p.n for p in points)


def test_cell_document_reads_back_as_the_same_config() -> None:
    """The stored cell config keeps only non-default fields and the kinds, and parses back to the same config."""
    from crl.advise.pilot import cell_document

    config = pilot_config(_config(), n=300, m=50, steps=20, seed=3)
    document = cell_document(config)
    assert document["data"]["source"] == "synthetic" and document["model"]["encoder"] == "mlp"
    assert "beta1" not in document.get("optim", {})
    assert parse_config(document) == config


def test_epochs_give_each_cell_e_epochs_of_its_n_at_the_experiments_batch() -> None:
    """--epochs E: b_n = the largest power of two <= min(b, n / 8) and E floor(n / b_n) steps (the m*(n) cells'
    schedule); the design's budget counts each cell at its own shape, and the cell config carries b_n."""
    config = _config()
    assert cell_shape(40, None, 300, 16) == CellShape(16, 40)
    assert cell_shape(40, 3, 300, 16) == CellShape(16, 3 * 18)
    assert cell_shape(40, 3, 100, 16) == CellShape(8, 3 * 12)
    design = design_pilot(config, 10**9, n_full=4096, levels=3, seeds=2, epochs=3)
    expected = sum(
        cell_samples(config, p.m, cell_shape(40, 3, p.n, 16).steps, cell_shape(40, 3, p.n, 16).batch)
        for p in design.points
    )
    assert design.epochs == 3 and design.samples_per_seed == expected
    cell = pilot_config(config, n=100, m=5, steps=36, batch=8)
    assert cell.data.batch_size == 8 and cell.optim.total_steps == 36


def test_epochs_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="--epochs 0"):
        design_pilot(_config(), 10**9, n_full=4096, epochs=0)


def test_fixed_sets_embed_at_most_their_candidates_per_step() -> None:
    """SCRL's fixed sets: a step embeds the union of the batch's sets, at most the n candidates (b m = 160 > 100),
    and b m when that is fewer; fixed_pool embeds its m."""
    sets = _config("fixed_sets")
    assert cell_samples(sets, 10, steps=7, n=100) == 7 * (2 * 16 + 100)
    assert cell_samples(sets, 10, steps=7, n=4096) == 7 * (2 * 16 + 160)
    assert cell_samples(_config("fixed_pool"), 10, steps=7, n=100) == 7 * (2 * 16 + 10)
