"""``[loss] estimator = "fastclip"`` in training runs: config checks, the minibatch limit, exact pool means, resume.

If these fail, a training run with the moving-average estimator would accept settings it cannot use, train a
different model than the minibatch gcl loss at gamma = 1, index u_i by something other than the items' ids
(so u_i would not converge to the pool means), draw negatives outside the fixed pool, or lose u_i / the gamma
schedule's position across an interrupted run.
"""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from crl.data import PairedArrays
from crl.negatives import Draw, EmbeddedBatch, embed_negatives
from crl.train.build import Streams, build_sampler
from crl.train.config import ConfigError, LossConfig
from crl.train.cursor import DataCursor
from crl.train.data import build_source
from crl.train.estimator import StepLoss, gamma_of
from crl.train.false_negatives import FalseNegativeIds
from crl.train.loop import TrainingLoop, train
from crl.train.loss import batch_loss
from tests.train.helpers import fit, tiny_config

FASTCLIP = {
    "form": "gcl",
    "negatives": "shared_pool",
    "n_negatives": 16,
    "pool_size": 300,
    "symmetric": False,
    "learnable_tau": False,
    "estimator": "fastclip",
}
SHORT = {"total_steps": 8, "warmup_steps": 2}


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"form": "infonce"}, "form = 'infonce' (needs 'gcl')"),
        ({"negatives": "in_batch", "n_negatives": 0, "pool_size": 0}, "negatives = 'in_batch'"),
        ({"symmetric": True}, "symmetric = True"),
        ({"learnable_tau": True}, "learnable_tau = True"),
        ({"gamma_decay_steps": 50}, "gamma_decay_steps = 50 is read only by gamma_schedule = 'cosine'"),
        ({"estimator": "minibatch", "gamma": 0.3}, "gamma set with estimator = 'minibatch'"),
        ({"estimator": "minibatch", "gamma_schedule": "cosine"}, "gamma_schedule set with estimator"),
        ({"gamma": 0.0}, "gamma"),
        ({"gamma": 1.5}, "gamma"),
    ],
)
def test_unusable_settings_are_refused_by_name(tmp_path: Path, changes: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace(")", r"\)")):
        tiny_config(tmp_path, "bad", loss={**FASTCLIP, **changes})


def test_pool_size_is_checked_against_the_data(tmp_path: Path) -> None:
    """A pool larger than the training set, a pool with in-batch negatives, or one for a truth that generates
    its negatives from p- is refused (a silently ignored pool would train another objective)."""
    with pytest.raises(ConfigError, match="pool_size = 5 needs negatives = 'shared_pool'"):
        tiny_config(tmp_path, "bad", loss={"pool_size": 5})
    config = tiny_config(tmp_path, "big", loss={**FASTCLIP, "pool_size": 10**6})
    with pytest.raises(ValueError, match="pool_size = 1000000 exceeds the"):
        build_sampler(config, build_source(config.data, seed=0))
    synthetic = tiny_config(
        tmp_path,
        "synthetic",
        data={"source": "synthetic", "n_train": 64, "dim": 3, "kappa": 8.0, "batch_size": 16},
        loss=FASTCLIP,
    )
    with pytest.raises(ValueError, match="draws fresh negatives from p-"):
        build_sampler(synthetic, build_source(synthetic.data, seed=0))


def test_pool_draws_stay_in_the_first_pool_size_items(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, "pool", loss={**FASTCLIP, "pool_size": 7, "n_negatives": 500})
    sampler = build_sampler(config, build_source(config.data, seed=0))
    drawn = sampler.draw(
        EmbeddedBatch(torch.zeros(4, 2), torch.zeros(4, 2)), torch.Generator().manual_seed(0)
    )
    assert drawn.y is not None and set(drawn.y.tolist()) == set(range(7))


def test_gamma_schedule_of_the_config() -> None:
    """Constant gamma, and the cosine from 1 to the floor over gamma_decay_steps (0: the run's total steps)."""
    assert gamma_of(LossConfig(**FASTCLIP, gamma=0.4), 100) == 0.4
    cosine = gamma_of(LossConfig(**FASTCLIP, gamma=0.2, gamma_schedule="cosine"), 100)
    assert callable(cosine) and cosine(0) == 1.0 and cosine(100) == cosine(500) == pytest.approx(0.2)
    assert cosine(50) == pytest.approx(0.2 + 0.8 * 0.5 * (1 + math.cos(math.pi / 2)))
    short = gamma_of(LossConfig(**FASTCLIP, gamma=0.2, gamma_schedule="cosine", gamma_decay_steps=10), 100)
    assert callable(short) and short(10) == pytest.approx(0.2)


def test_gamma_one_is_the_minibatch_gcl_loss_in_value_and_gradient() -> None:
    """With gamma = 1, StepLoss(fastclip) equals batch_loss(gcl) on the same batch (float64)."""
    generator = torch.Generator().manual_seed(3)
    a, p, neg = (
        F.normalize(torch.randn(n, 5, generator=generator, dtype=torch.float64), dim=1).requires_grad_()
        for n in (6, 6, 9)
    )
    tau = torch.tensor(0.2, dtype=torch.float64)
    ids = torch.tensor([4, 0, 9, 2, 7, 5])
    batch, negatives = EmbeddedBatch(a, p), Draw("shared", "embeddings", y=neg)
    fastclip = StepLoss(LossConfig(**FASTCLIP, gamma=1.0), n_items=10, total_steps=1)
    for _ in range(2):  # the first visit sets u_i = g_hat_i; the second applies the update at gamma = 1
        got = fastclip(batch, negatives, ids, tau)
        got_grads = torch.autograd.grad(got, (a, p, neg))
    want = batch_loss(batch, negatives, tau=tau, form="gcl", symmetric=False)
    want_grads = torch.autograd.grad(want, (a, p, neg))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for got_grad, want_grad in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(got_grad, want_grad, rtol=1e-10, atol=1e-12)


def test_fastclip_refuses_false_negative_ids() -> None:
    """Data that name item ids (duplicate texts) are masked by the minibatch loss; fastclip's u_i cannot be, so it
    must refuse them rather than train another objective silently."""
    generator = torch.Generator().manual_seed(0)
    a, neg = (F.normalize(torch.randn(n, 3, generator=generator), dim=1) for n in (4, 5))
    ids = FalseNegativeIds(torch.arange(4), torch.arange(5))
    fastclip = StepLoss(LossConfig(**FASTCLIP), n_items=10, total_steps=1)
    with pytest.raises(ValueError, match="cannot leave false negatives out"):
        fastclip(
            EmbeddedBatch(a, a),
            Draw("shared", "embeddings", y=neg),
            torch.arange(4),
            torch.tensor(0.1),
            ids,
        )
    assert fastclip.state is not None and not bool(fastclip.state.seen.any())


def test_gamma_one_trains_the_minibatch_gcl_model(tmp_path: Path, one_thread: None) -> None:
    """A run with fastclip at gamma = 1 follows the minibatch gcl run step by step (same negatives, same batches),
    past the first epoch, where u_i of a revisited anchor would keep its old value under a wrong update; fastclip
    at gamma = 0.99 (the control) leaves it there.

    14 steps of 128 pairs: the digits' training halves fill 10 steps, so steps 11-14 revisit anchors. At lr 1e-4
    the float32 rounding of the two estimators moves the losses by about 2e-8 (at lr 3e-3 AdamW amplifies it to
    1e-5 and more, which depends on the platform's kernels); the control moves them by 2e-4 or more at every
    revisiting step. Tolerance: 1e-6."""
    optim = {"total_steps": 14, "warmup_steps": 2, "lr": 1e-4}
    mini = tiny_config(tmp_path, "mini", loss={**FASTCLIP, "estimator": "minibatch"}, optim=optim)
    source = build_source(mini.data, seed=0)
    want = [row.loss for row in train(mini, source, Streams.derive(0)).metrics]
    runs: dict[float, list[float]] = {}
    for gamma in (1.0, 0.99):
        fast = tiny_config(
            tmp_path,
            f"fast{gamma}",
            loss={**FASTCLIP, "gamma": gamma, "gamma_schedule": "constant"},
            optim=optim,
        )
        runs[gamma] = [row.loss for row in train(fast, source, Streams.derive(0)).metrics]
    torch.testing.assert_close(runs[1.0], want, rtol=0, atol=1e-6)
    assert all(abs(got - ref) > 1e-6 for got, ref in zip(runs[0.99][10:], want[10:], strict=True))


def test_u_converges_to_the_exact_pool_means_with_a_fixed_model(tmp_path: Path) -> None:
    """Fixed embeddings, ids from the data cursor, negatives from the config's pool sampler: u_i must converge to
    g_i = (1/m) sum_{j < m} exp(Delta_ij / tau), computed in closed form in float64 over the whole pool.

    Each u_i is visited once per epoch. Judged by z-scores from the exact variance v_i / b of g_hat_i (v_i the
    pool variance of exp(Delta_ij / tau), b draws with replacement): the last u_i has variance
    gamma / (2 - gamma) v_i / b (an exponential average of i.i.d. draws), so the mean of its squared z-scores is
    about 1; the average of u_i over T epochs has variance about v_i / (b T) (the average has unit gain).
    """
    n_items, dim, m, b, batch, tau, gamma = 96, 4, 40, 8, 16, 0.5, 0.05
    epochs, burn_in = 300, 60
    generator = torch.Generator().manual_seed(11)
    x = F.normalize(torch.randn(n_items, dim, generator=generator, dtype=torch.float64), dim=1)
    y = F.normalize(x + 0.5 * torch.randn(n_items, dim, generator=generator, dtype=torch.float64), dim=1)
    config = tiny_config(
        tmp_path, "fixed", loss={**FASTCLIP, "pool_size": m, "n_negatives": b, "tau": tau, "gamma": gamma}
    )
    sampler = build_sampler(config, PairedArrays(x, y))
    cursor = DataCursor(n_items, batch, torch.Generator().manual_seed(1))
    step_loss = StepLoss(config.loss, n_items, total_steps=1)
    state = step_loss.state
    assert state is not None
    draws = torch.Generator().manual_seed(2)
    terms = torch.exp((x @ y[:m].T - (x * y).sum(1, keepdim=True)) / tau)
    exact, g_hat_variance = terms.mean(dim=1), terms.var(dim=1, correction=0) / b
    averaged = torch.zeros(n_items, dtype=torch.float64)
    for _ in range(epochs * n_items // batch):
        ids = cursor.next_batch()
        embedded = EmbeddedBatch(x[ids], y[ids])
        negatives = embed_negatives(sampler.draw(embedded, draws), lambda rows: y[rows])
        step_loss(embedded, negatives, ids, torch.tensor(tau, dtype=torch.float64))
        if cursor.position == n_items and cursor.epoch >= burn_in:  # after each epoch's last step
            averaged += state.u / (epochs - burn_in)
    assert bool(state.seen.all())
    last_z = (state.u - exact) / (gamma / (2 - gamma) * g_hat_variance).sqrt()
    assert float(last_z.square().mean()) < 2.0
    average_z = (averaged - exact) / (g_hat_variance / (epochs - burn_in)).sqrt()
    assert float(average_z.abs().max()) < 4.5


def test_an_interrupted_fastclip_run_resumes_bit_for_bit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kill the run (an exception) after its step-6 checkpoint, resume it, and compare the final checkpoint with an
    uninterrupted run's, byte for byte: u_i, the seen mask and the gamma schedule's step must all be restored."""
    loss = {**FASTCLIP, "gamma": 0.1, "gamma_schedule": "cosine", "gamma_decay_steps": 10}
    run = {"checkpoint_every": 3, "keep_checkpoints": 10}
    optim = {"total_steps": 12, "warmup_steps": 2}
    full = fit(tiny_config(tmp_path, "full", loss=loss, optim=optim, run=run))
    killed = tiny_config(tmp_path, "killed", loss=loss, optim=optim, run=run)
    step = TrainingLoop.train_step

    def crash_after_step_7(loop: TrainingLoop) -> torch.Tensor:
        if loop.step == 7:
            raise KeyboardInterrupt
        return step(loop)

    monkeypatch.setattr(TrainingLoop, "train_step", crash_after_step_7)
    with pytest.raises(KeyboardInterrupt):
        fit(killed)
    monkeypatch.setattr(TrainingLoop, "train_step", step)
    resumed = fit(killed)
    assert resumed.resumed_from == 6
    tensors = load_file(str(resumed.checkpoint))
    assert int(tensors["estimator.step"]) == 12 and bool(tensors["estimator.seen"].any())
    assert resumed.checkpoint.read_bytes() == full.checkpoint.read_bytes()
