"""[A]'s m*(n) on locked features: the tiny grid through the sweep engine on synthetic features (stopped, resumed,
summarised with censoring), the earlier cap as a config of the loop (the moving-average path), the design's
cells, and real Fashion-MNIST cells (skipped without the data)."""

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from scipy import stats

import crl.experiments.mstar.cell as cell_module
import crl.train.estimator as estimator_module
from crl.data import LockedFeaturePairs, PairedArrays, PairSource
from crl.experiments.mstar.cell import compute_cell, epoch_losses, run_cell
from crl.experiments.mstar.design import (
    ABLATION_CAP,
    FIDELITIES,
    batch_for,
    claim_of,
    grid_cells,
    grid_of,
    train_config,
)
from crl.experiments.mstar.experiment import (
    FASHION_ITEMS,
    check_cnn_backbone,
    run_experiment,
    scrl_overlaps,
    stored_records,
)
from crl.experiments.mstar.report import markdown_report, render_figures
from crl.experiments.mstar.summary import seeds_needed, summarise
from crl.objectives import MovingAverageState, cosine_gamma
from crl.sweep import Cell, SweepStore
from crl.train.build import Streams
from crl.train.config import DataConfig, LockedData, parse_config
from crl.train.locked_heldout import HeldOut
from crl.train.loop import StepMetrics, TrainingLoop
from tests.train.helpers import fit

TINY = FIDELITIES["fashion"]["tiny"]
D = 12
FASHION = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")


def _features(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x, a noisy view y of it, and 4 classes: clusters around 4 random centres."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(count) % 4
    centres = torch.randn(4, D, generator=g)
    x = centres[labels] + 0.8 * torch.randn(count, D, generator=g)
    return x, x + 0.3 * torch.randn(count, D, generator=g), labels


def _synthetic_source(data: DataConfig) -> PairSource:
    """Locked-like features of n pairs (+ the pool), or for the ablation's image source the same without keys."""
    if isinstance(data, LockedData):
        count = data.n_train + data.disjoint_size
        x, y, _ = _features(count, 1)
        return LockedFeaturePairs(x, y, torch.arange(count), n_pairs=data.n_train)
    x, y, _ = _features(data.n_train, 1)
    return PairedArrays(x, y)


def _synthetic_heldout(*args: object) -> HeldOut:
    x, y, labels = _features(120, 2)
    return HeldOut(x, y, labels=labels)


@pytest.fixture
def synthetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cells train on synthetic features and score on a synthetic test split (no data set, no feature cache)."""
    monkeypatch.setattr(cell_module, "_source", _synthetic_source)
    monkeypatch.setattr(cell_module, "load_heldout", _synthetic_heldout)


class _StoppedError(RuntimeError):
    pass


@pytest.mark.slow  # a tiny m*(n) grid run twice: 26 s under load
def test_a_tiny_run_resumes_without_recomputing_and_gives_censored_m_star(
    synthetic: None, one_thread: None, tmp_path: Path
) -> None:
    """Stopped after 7 cells, a rerun computes each remaining cell once; a third run computes nothing; the
    summary has m* with a censoring flag per curve, slopes per regime and their difference per arm; the figures
    and the Markdown report are written."""
    computed: list[str] = []

    def stopping(cell: Cell) -> dict[str, Any]:
        if len(computed) == 7:
            raise _StoppedError("the session ended")
        computed.append(cell.key + str(cell.seed))
        return compute_cell(cell)

    database = tmp_path / "results.sqlite"
    with pytest.raises(_StoppedError):
        run_experiment(database, "fashion", TINY, run_id="first", compute=stopping)
    stopped = stored_records(database, "fashion", TINY)
    assert len(stopped) == 7 and {record.run_id for record in stopped} == {"first"}

    def counting(cell: Cell) -> dict[str, Any]:
        computed.append(cell.key + str(cell.seed))
        return compute_cell(cell)

    records = run_experiment(database, "fashion", TINY, run_id="second", compute=counting)
    cells = grid_cells("fashion", TINY)
    assert len(computed) == len(set(computed)) == len(cells) == len(records)
    assert {record.run_id for record in records} == {"first", "second"}
    assert run_experiment(database, "fashion", TINY, run_id="third", compute=counting) == records
    assert len(computed) == len(cells)
    with SweepStore(database) as store:
        assert len(store.records(claim_of("fashion"))) == len(cells)
    summary = summarise(records, "fashion", TINY, resamples=50)
    in_sample = [c for c in summary.curves if c.arm == "in_sample" and c.metric == "recall@1"]
    assert len(in_sample) == 6 and all(c.saturation is not None and c.seeds == 2 for c in in_sample)
    assert all(
        c.saturation.saturation.censoring in ("none", "left", "right") for c in in_sample if c.saturation
    )
    slopes = {(s.arm, s.regime) for s in summary.slopes if s.metric == "recall@1"}
    assert {("in_sample", "shared"), ("in_sample", "independent"), ("ablation_cap", "shared")} <= slopes
    assert ("in_sample", "recall@1") in summary.differences
    assert all(math.isfinite(record.result["recall@1"]) for record in records)
    figures = render_figures(summary, "fashion", tmp_path / "report", title="tiny")
    assert all(path.stat().st_size > 0 for path in figures)
    overlaps = scrl_overlaps("fashion", TINY)
    table = markdown_report(
        summary, "fashion", TINY, fidelity="tiny", run_id="second", commit="abc1234", overlaps=overlaps
    )
    assert f"Written by run `second` at commit `abc1234`, from {len(cells)} stored cells" in table
    assert "| recall@1 | in_sample | SCRL | 256 | 2 |" in table
    assert "`first` (7)" in table and f"`second` ({len(cells) - 7})" in table
    assert summary.cell_seconds == pytest.approx(sum(record.wall_s for record in records))
    assert {c.arm for c in summary.convergence} == {
        "in_sample",
        "disjoint",
        "budget",
        "ablation_exact",
        "ablation_cap",
    }


def test_the_grid_pairs_seeds_and_sizes_its_arms() -> None:
    """A cell's seed is shared by both regimes, every m and every arm at its n; the in-sample arm's cells come
    first, every seed; m runs to n; the disjoint arm alone has a pool of 2 n; the main arms take E epochs of
    floor(n / b) steps (budget: B anchors) at b = batch_for(n)."""
    cells = grid_cells("wordnet", FIDELITIES["wordnet"]["tiny"])
    grid = FIDELITIES["wordnet"]["tiny"]
    trained = [c for c in cells if c.params["arm"] != "backbone"]
    assert len(trained) == grid.seeds * 2 * 4 * (3 + 2 + 2)
    seeds_at: dict[int, set[int]] = {}
    for cell in trained:
        params = cell.params
        seeds_at.setdefault(params["n"], set()).add(cell.seed)
        assert params["m"] <= params["n"] and max(grid.m_values(params["n"])) == params["n"]
        assert params["pool"] == (2 * params["n"] if params["arm"] == "disjoint" else 0)
        b = params["recipe"]["batch"]
        assert b == batch_for(params["n"], 256)
        epochs = grid.epochs * (params["n"] // b)
        assert params["steps"] == (
            math.ceil(grid.budget_anchors / b) if params["arm"] == "budget" else epochs
        )
    assert all(len(seeds) == grid.seeds for seeds in seeds_at.values())
    arms = [c.params["arm"] for c in trained]
    first_other = next(i for i, arm in enumerate(arms) if arm != "in_sample")
    assert set(arms[:first_other]) == {"in_sample"} and "in_sample" not in arms[first_other:]
    assert batch_for(500, 256) == 32 and batch_for(1000, 256) == 64 and batch_for(16000, 256) == 256
    assert FIDELITIES["wordnet"]["full"].m_values(1000) == (1, 4, 5, 10, 16, 20, 50, 100, 200, 400, 700, 1000)


def test_n_max_keeps_every_arm_below_it_and_seeds_add_to_the_grid() -> None:
    """The seed rule's fallback: --n-max 4000 --seeds 30 of the full grid is every arm at n <= 4000, 30 seeds;
    its cells at the first 4 seeds are cells of the full grid (a shared --out reuses them)."""
    named, grid = grid_of("fashion", "full", seeds=30, n_max=4000)
    assert named == "fashion" and grid.seeds == 30 and grid.ns == (500, 1000, 2000, 4000)
    assert (
        grid.disjoint_ns == (1000, 4000)
        and grid.budget_ns == (1000,)
        and grid.ablation_ns == (500, 1000, 2000)
    )
    full = {(c.key, c.seed) for c in grid_cells("fashion", FIDELITIES["fashion"]["full"])}
    fallback = [(c.key, c.seed) for c in grid_cells("fashion", grid)]
    assert sum(ident in full for ident in fallback) == 1 + 4 * (len(fallback) - 1) // 30


def _ablation_params(m: int, steps: int = 8, arm: str = "ablation_cap") -> dict[str, Any]:
    cell = next(c for c in grid_cells("fashion", TINY) if c.params["arm"] == arm)
    return {**cell.params, "n": 160, "m": m, "steps": steps}


def test_the_old_cap_is_a_config_that_takes_the_moving_average_path(
    monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    """The ablation's cap: shared_pool over the first m items, k = 64 embedded per step, FastCLIP's u_i with
    gamma from 1 to 0.2 over half the steps; the loop's step goes through moving_average_loss with that gamma
    and k negatives; at m <= 64 gamma = 1 (the step's own L_hat); the exact arm never takes that path."""
    calls: list[dict[str, Any]] = []
    original = estimator_module.moving_average_loss

    def spy(*args: Any, **kwargs: Any) -> torch.Tensor:
        gamma = kwargs["gamma"]
        calls.append({"negatives": args[2].shape[0], "gamma": [gamma(t) for t in range(6)]})
        return original(*args, **kwargs)

    monkeypatch.setattr(estimator_module, "moving_average_loss", spy)
    config = train_config(_ablation_params(100), seed=3)
    loss, optim = config.loss, config.optim
    assert (loss.negatives, loss.pool_size, loss.n_negatives, loss.estimator) == (
        "shared_pool",
        100,
        64,
        "fastclip",
    )
    assert (loss.gamma, loss.gamma_schedule, loss.gamma_decay_steps, loss.form, loss.tau) == (
        0.2,
        "cosine",
        4,
        "gcl",
        0.2,
    )
    assert (config.data.batch_size, optim.lr, optim.grad_clip, optim.warmup_steps) == (64, 2e-3, 0.0, 0)
    assert config.model.encoder == "mlp" and config.model.hidden == [256] and config.model.embedding_dim == 64
    x, y, _ = _features(160, 0)
    loop = TrainingLoop(config, PairedArrays(x, y), Streams.derive(3))
    assert isinstance(loop.step_loss.state, MovingAverageState)
    loop.train_step()
    loop.train_step()
    expected = [cosine_gamma(4, 0.2)(t) for t in range(6)]
    assert expected[0] == 1.0 and expected[4] == expected[5] == pytest.approx(0.2)
    assert calls == [{"negatives": ABLATION_CAP, "gamma": expected}] * 2
    small = train_config(_ablation_params(40), seed=3).loss
    assert (small.n_negatives, small.pool_size, small.gamma, small.gamma_schedule) == (
        40,
        40,
        1.0,
        "constant",
    )
    exact = train_config(_ablation_params(100, arm="ablation_exact"), seed=3)
    assert (exact.loss.negatives, exact.loss.n_negatives, exact.loss.estimator) == (
        "fixed_pool",
        100,
        "minibatch",
    )
    calls.clear()
    TrainingLoop(exact, PairedArrays(x, y), Streams.derive(3)).train_step()
    assert calls == []


def _ok(value: float) -> dict[str, Any]:
    """A finished cell's result with ``value`` for both metrics and a converged loss."""
    return {
        "status": "ok",
        "recall@1": value,
        "class_accuracy@1": value,
        "loss_drop": 1.0,
        "last_epoch_change": 0.0,
    }


def _fake(cell: Cell) -> dict[str, Any]:
    """A curve that saturates at m = n / 4 for SSCRL and is flat for SCRL: a deterministic stand-in for training."""
    params = cell.params
    if params["arm"] == "backbone":
        return {"status": "ok", "recall@1": 0.1, "class_accuracy@1": 0.5}
    if (params["arm"], params["regime"], params["n"], params["m"]) == ("budget", "independent", 64, 16):
        return {"status": "diverged", "reason": "the training loss is nan in steps 3..3"}
    level = min(1.0, 4 * params["m"] / params["n"]) if params["regime"] == "shared" else 1.0
    value = 0.5 + 0.2 * level + 1e-4 * (cell.seed % 7)
    return _ok(value)


def test_the_summary_finds_a_known_m_star_and_its_slope(tmp_path: Path) -> None:
    """SSCRL saturates at m = n / 4 at every n: m* = n / 4 uncensored, slope 1 with bounds [1, 1]; SCRL is flat:
    m* left-censored at the smallest m (round(0.05 n)), its slope unbounded, so is the difference; diverged cells
    are counted and their m left out."""
    records = run_experiment(tmp_path / "r.sqlite", "fashion", TINY, run_id="r", compute=_fake)
    summary = summarise(records, "fashion", TINY, resamples=50)
    shared = [c for c in summary.curves if (c.arm, c.regime, c.metric) == ("in_sample", "shared", "recall@1")]
    assert [
        (c.saturation.saturation.m_star, c.saturation.saturation.censoring) for c in shared if c.saturation
    ] == [
        (16, "none"),
        (32, "none"),
        (64, "none"),
    ]
    fit = next(
        s for s in summary.slopes if (s.arm, s.regime, s.metric) == ("in_sample", "shared", "recall@1")
    )
    assert fit.point == pytest.approx(1.0) and (fit.bound_low, fit.bound_high) == pytest.approx((1.0, 1.0))
    flat = next(
        s for s in summary.slopes if (s.arm, s.regime, s.metric) == ("in_sample", "independent", "recall@1")
    )
    assert set(flat.censoring) == {"left"} and (flat.bound_low, flat.bound_high) == (-math.inf, math.inf)
    difference = summary.differences[("in_sample", "recall@1")]
    assert difference.point == pytest.approx(1.0 - flat.point) and flat.m_star == (3, 6, 13)
    assert (difference.bound_low, difference.bound_high) == (-math.inf, math.inf)
    assert summary.baseline["recall@1"] == 0.1 and summary.seeds_rule == 2
    diverged = next(
        c
        for c in summary.curves
        if (c.arm, c.regime, c.n, c.metric) == ("budget", "independent", 64, "recall@1")
    )
    assert diverged.failed == TINY.seeds and diverged.m == (3, 32, 64)


def _varied(cell: Cell) -> dict[str, Any]:
    """A value that differs by arm, m and seed, so that paired differences vary over seeds."""
    params = cell.params
    if params["arm"] == "backbone":
        return {"status": "ok", "recall@1": 0.1, "class_accuracy@1": 0.5}
    shift = {"ablation_exact": 5, "disjoint": 2}.get(params["arm"], 0)
    value = 0.5 + 0.01 * shift + 1e-3 * ((cell.seed * (params["m"] + 3 + shift)) % 11)
    return _ok(value)


def test_the_paired_contrasts_match_a_brute_force_pairing_of_the_cells(tmp_path: Path) -> None:
    """Every (regime, n, m) the two arms share: the mean of a - b over the seeds and scipy's t interval of it."""
    records = run_experiment(tmp_path / "r.sqlite", "fashion", TINY, run_id="r", compute=_varied)
    summary = summarise(records, "fashion", TINY, resamples=20)
    values: dict[tuple[str, str, int, int, int], float] = {}
    for record in records:
        params = record.cell.params
        if params["arm"] != "backbone":
            values[(params["arm"], params["regime"], params["n"], params["m"], record.cell.seed)] = (
                record.result["recall@1"]
            )
    expected = {}
    for first, second in (("ablation_exact", "ablation_cap"), ("disjoint", "in_sample")):
        pairs: dict[tuple[str, int, int], list[float]] = {}
        for (arm, regime, n, m, seed), value in values.items():
            if arm == first and (second, regime, n, m, seed) in values:
                pairs.setdefault((regime, n, m), []).append(value - values[(second, regime, n, m, seed)])
        for (regime, n, m), diffs in pairs.items():
            low, high = stats.t.interval(0.95, len(diffs) - 1, loc=np.mean(diffs), scale=stats.sem(diffs))
            expected[(first, regime, n, m)] = (float(np.mean(diffs)), low, high, len(diffs))
    found = {
        (c.first, c.regime, c.n, c.m): (c.mean, c.low, c.high, c.seeds)
        for c in summary.contrasts
        if c.metric == "recall@1"
    }
    assert found.keys() == expected.keys()
    assert {key[0] for key in found} == {"ablation_exact", "disjoint"}
    assert {key[1] for key in found if key[0] == "disjoint"} == {"shared", "independent"}
    for cell_key, (mean, low, high, seeds) in expected.items():
        assert found[cell_key][3] == seeds == TINY.seeds
        assert found[cell_key][:3] == pytest.approx((mean, low, high), abs=1e-12)
    report = markdown_report(summary, "fashion", TINY, fidelity="tiny", run_id="r", commit="c", overlaps=())
    assert "| recall@1 | ablation_exact - ablation_cap | SSCRL |" in report


def test_epoch_losses_leave_out_an_incomplete_last_epoch() -> None:
    rows = [
        StepMetrics(step, epoch, loss, 0.1, 0.2)
        for step, (epoch, loss) in enumerate([(0, 3.0), (0, 1.0), (1, 1.0), (1, 0.0), (2, 9.0)], 1)
    ]
    assert epoch_losses(rows) == [2.0, 0.5]


def test_the_seed_rule_asks_for_a_tolerance_below_a_quarter_of_the_rise() -> None:
    """S = 4: t(0.975, 3) 0.002 / 2 = 0.0032 <= 0.015 / 4, while S = 3 gives 0.0050; a rise whose quarter is
    within 1% of the plateau is flat (tol's floor decides it), so is no rise."""
    assert seeds_needed(0.002, 0.015, 0.3) == 4
    assert seeds_needed(0.0, 0.02, 0.3) == 2
    assert seeds_needed(0.002, 0.012, 0.3) is None
    assert seeds_needed(0.01, 0.0, 0.3) is None


@pytest.mark.skipif(not FASHION.is_file(), reason="Fashion-MNIST (dataset-fashion-mnist) is not installed")
def test_real_fashion_cells_train_and_score(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread: None
) -> None:
    """A head on locked pixel views (SCRL, disjoint pool) and the ablation's cap on fresh views: finite scores on
    the first 200 test images' fixed views, the same twice; the backbone's own pixels score too."""
    monkeypatch.setenv("CRL_CACHE_DIR", str(tmp_path))
    cell_module.load_heldout.cache_clear()
    cell_module._source.cache_clear()
    cells = grid_cells("fashion", TINY)
    disjoint = next(c for c in cells if c.params["arm"] == "disjoint" and c.params["regime"] == "independent")
    cap = _ablation_params(100, steps=2)
    for params, seed in ((disjoint.params, disjoint.seed), (cap, 5)):
        result = run_cell(params, seed)
        assert result["status"] == "ok" and result["steps"] == params["steps"]
        assert 0 <= result["recall@1"] <= 1 and 0 <= result["class_accuracy@1"] <= 1
        assert run_cell(params, seed)["recall@1"] == result["recall@1"]
    backbone = run_cell(cells[0].params, 0)
    assert backbone["recall@1"] > 0.05


@pytest.mark.skipif(not FASHION.is_file(), reason="Fashion-MNIST (dataset-fashion-mnist) is not installed")
@pytest.mark.parametrize(("first_image", "accepted"), [(0, False), (49_999, False), (FASHION_ITEMS, True)])
def test_a_cnn_backbone_must_have_trained_on_images_past_those_of_the_grid(
    tmp_path: Path, first_image: int, accepted: bool
) -> None:
    """A checkpoint whose run trained on any of images 0-49,999 (the grid's n and pools) is refused, naming the
    fix; one trained from image 50,000 on is accepted."""
    run = {"out_dir": str(tmp_path), "name": "cnn", "seed": 0, "num_threads": 1, "progress": False}
    data = {"source": "fashion_mnist", "n_train": 32, "batch_size": 16, "first_image": first_image}
    fit(
        parse_config(
            {
                "data": data,
                "model": {"encoder": "cnn", "channels": [2], "hidden": 4, "embedding_dim": 3},
                "optim": {"total_steps": 1, "warmup_steps": 0},
                "run": {**run, "tensorboard": False},
            }
        )
    )
    if accepted:
        check_cnn_backbone(str(tmp_path / "cnn"))
        return
    with pytest.raises(
        ValueError, match=f"images from index {first_image} on.*first_image = 50000"
    ) as caught:
        check_cnn_backbone(str(tmp_path / "cnn"))
    assert "\n" not in str(caught.value)


def _timed(cell: Cell) -> dict[str, Any]:
    """A cell whose training takes m ms per step over 10 steps, and whose wall time adds nothing to report."""
    params = cell.params
    if params["arm"] == "backbone":
        return {"status": "ok", "recall@1": 0.1, "class_accuracy@1": 0.5}
    return {**_fake(cell), "steps": 10, "train_s": 0.01 * params["m"]}


def test_the_cost_is_the_median_ms_per_step_at_the_ends_of_m_and_pairs_per_second(tmp_path: Path) -> None:
    """ms per step = m by construction: 1000 train_s / steps at the smallest and largest m; pairs/s = 1000 b / ms;
    one row per (arm, regime, n) that trained, the diverged cells left out."""
    records = run_experiment(tmp_path / "r.sqlite", "fashion", TINY, run_id="r", compute=_timed)
    costs = {(c.arm, c.regime, c.n): c for c in summarise(records, "fashion", TINY, resamples=10).costs}
    cell = costs[("in_sample", "shared", 128)]
    assert (cell.m_low, cell.m_high) == (6, 128) and (cell.ms_low, cell.ms_high) == pytest.approx(
        (6.0, 128.0)
    )
    assert cell.steps == 10 and cell.cells == 4 * TINY.seeds
    assert cell.pairs_per_s(cell.ms_high) == pytest.approx(1000 * cell.batch / 128)
    assert costs[("budget", "independent", 64)].cells == 3 * TINY.seeds
    assert set(costs) == {
        (c.arm, c.regime, c.n) for c in summarise(records, "fashion", TINY, resamples=10).curves
    }


def test_scrl_overlaps_follow_m_over_c_and_the_whole_set_at_m_equal_c(synthetic: None) -> None:
    """Over 2,016 pairs of anchors, SCRL's sets overlap about m / C (the uniform sets' value) below C; at m = n
    in-sample every anchor keeps all C - 1 others, so two sets share C - 2 of their C - 1 members; the disjoint
    pool has C = 2 n candidates, none of them an anchor."""
    overlaps = scrl_overlaps("fashion", TINY)
    by_key = {(o.arm, o.n, o.m): o for o in overlaps}
    assert {o.arm for o in overlaps} == {"in_sample", "disjoint"}
    whole = by_key[("in_sample", 256, 256)].overlap
    assert whole.mean == pytest.approx(254 / 255) and whole.rows == 64
    for o in overlaps:
        if o.m < o.candidates - 1:
            assert abs(o.overlap.mean - o.overlap.expected) < 0.05 + 0.5 / o.m
    assert {o.candidates for o in overlaps if o.arm == "disjoint"} == {2 * n for n in TINY.disjoint_ns}
