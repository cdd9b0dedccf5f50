"""One cell of the Fashion-MNIST m*(n) experiment: train on n images with a fixed negative set of m, then score.

Both regimes use two augmented views of an image as the positive pair (x, y), so they differ only in their
negatives ([A]'s two regimes, docs/theory.md section 1):

- ``shared`` (SSCRL): one pool of m of the n training images (the first m of a seed-drawn permutation, so the
  pools of one seed are nested in m) is the negative set of every anchor;
- ``independent`` (SCRL): anchor i has its own m negatives (the first m of its own seed-drawn permutation of the
  n images).

The objective is [A]'s empirical risk L_hat in gcl form, tau log((1/m) sum_j exp(Delta_ij / tau)), over the
whole fixed negative set. Each step takes b anchors and embeds a fresh view of k = min(m, ``neg_batch``) of
each anchor's negatives (SSCRL: k pool items shared by the batch; SCRL: k of the anchor's own). When k = m the
step's loss is L_hat's own term (gamma = 1); when m > k, FastCLIP's moving-average estimator
(:func:`crl.objectives.moving_average_loss`) keeps a running u_i of each item's pool mean, with gamma on
FastCLIP's cosine schedule from 1 to ``gamma_floor`` over the first half of the steps, so that the gradient
targets L_hat with all m negatives. Every run processes the same budget of anchors (``budget`` = steps x b),
whatever n and m.

Scores on the first ``n_test`` test images: the weighted kNN accuracy (k = 20, cosine, T = 0.07) with the first
``bank`` training images as the labelled memory, and two-view recall@1 (each test image's first view queries the
second views of all of them; one positive per query, so recall@1 = accuracy@1). The raw-pixel baseline
(:func:`pixel_baseline`) scores centred pixels the same way.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from crl._validate import check_choice
from crl._vocab import REGIMES, Regime
from crl.data import ImageAugmentation, ImageSet, load_fashion_mnist
from crl.metrics.classification import knn_accuracy
from crl.models import MLP, Encoder, embed
from crl.objectives import MovingAverageState, cosine_gamma, moving_average_loss
from crl.train.build import WarmupCosine
from crl.train.heldout_monitor import rank_of_positive
from crl.train.streams import derive_generator

__all__ = ["AUGMENTATION", "pixel_baseline", "run_cell"]

AUGMENTATION = ImageAugmentation(crop_scale=(0.6, 1.0), max_shift=0, flip_p=0.5, erase_p=0.0, noise_std=0.0)
"""The views of the experiment: random resized crop (area 0.6-1), horizontal flip (p = 0.5)."""

KNN_K, KNN_T, EVAL_SEED = 20, 0.07, 1234


@functools.lru_cache(maxsize=2)
def _split(split: str) -> ImageSet:
    return load_fashion_mnist("train" if split == "train" else "test")


@functools.lru_cache(maxsize=1)
def _test_views(n_test: int) -> tuple[Tensor, Tensor]:
    """Two fixed views of each of the first ``n_test`` test images (the generator of ``EVAL_SEED``)."""
    generator = derive_generator(EVAL_SEED, "fashion-mstar-views")
    images = _split("test").images[:n_test]
    return AUGMENTATION(images, generator), AUGMENTATION(images, generator)


def _scores(encode: Any, bank: int, n_test: int) -> dict[str, float]:
    """kNN accuracy and two-view recall@1 on the first ``n_test`` test images of an encoder (or a pixel map)."""
    train, test = _split("train"), _split("test")
    cpu = torch.device("cpu")
    memory = embed(encode, train.images[:bank], batch_size=2048, device=cpu)
    queries = embed(encode, test.images[:n_test], batch_size=2048, device=cpu)
    labels = test.labels[:n_test]
    knn = knn_accuracy(memory, train.labels[:bank], queries, labels, k=KNN_K, temperature=KNN_T, n_classes=10)
    first, second = _test_views(n_test)
    views_x = embed(encode, first, batch_size=2048, device=cpu)
    views_y = embed(encode, second, batch_size=2048, device=cpu)
    unit = functools.partial(torch.nn.functional.normalize, dim=1)
    rank = rank_of_positive(unit(views_x.double()), unit(views_y.double()))
    return {"knn_accuracy": knn, "recall_at_1": float((rank == 0).double().mean())}


def pixel_baseline(bank: int, n_test: int) -> dict[str, float]:
    """The scores of raw centred pixels (centred by the mean of the memory bank's images)."""
    train = _split("train").images[:bank]
    mean = train.reshape(bank, -1).mean(dim=0)
    return _scores(lambda images: images.reshape(images.shape[0], -1) - mean, bank, n_test)


def _negative_sets(regime: Regime, n: int, m: int, generator: torch.Generator) -> Tensor:
    """SSCRL: (m,) pool ids; SCRL: (n, m) ids, row i anchor i's own negatives (prefixes of permutations)."""
    if regime == "shared":
        return torch.randperm(n, generator=generator)[:m]
    return torch.rand(n, n, generator=generator).argsort(dim=1)[:, :m]


def _step_negatives(regime: Regime, sets: Tensor, ids: Tensor, k: int, generator: torch.Generator) -> Tensor:
    """The ids whose views are this step's negatives: (k,) shared, or (b, k) per anchor."""
    if regime == "shared":
        return sets if k == sets.shape[0] else sets[torch.randperm(sets.shape[0], generator=generator)[:k]]
    own = sets[ids]
    if k == own.shape[1]:
        return own
    columns = torch.rand(own.shape, generator=generator).argsort(dim=1)[:, :k]
    return own.gather(1, columns)


def _check_params(params: Mapping[str, Any]) -> None:
    check_choice("regime", params["regime"], REGIMES)
    if not 1 <= params["m"] <= params["n"] <= 60000:
        raise ValueError(f"need 1 <= m <= n <= 60000, got m = {params['m']}, n = {params['n']}")
    if params["batch"] > params["n"]:
        raise ValueError(f"batch = {params['batch']} exceeds n = {params['n']}")


def run_cell(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Train the cell's encoder and score it; a NaN loss ends the cell as ``status = "diverged"`` with its step.

    ``params``: regime, n, m, budget (anchors processed), batch (b), neg_batch (k cap), tau, lr, gamma_floor,
    hidden, dim, bank (labelled memory of the kNN), n_test (test images scored). Everything random derives from
    ``seed``.
    """
    _check_params(params)
    start = time.perf_counter()
    regime, n, m, b = params["regime"], params["n"], params["m"], params["batch"]
    k = min(m, params["neg_batch"])
    steps = max(1, params["budget"] // b)
    images = _split("train").images[:n]
    init, data = derive_generator(seed, "init"), derive_generator(seed, "data")
    views, negatives = derive_generator(seed, "views"), derive_generator(seed, "negatives")
    sets = _negative_sets(regime, n, m, negatives)
    encoder = Encoder(MLP(784, [params["hidden"]], params["dim"], generator=init))
    optimizer = torch.optim.AdamW(encoder.parameters(), lr=params["lr"], weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, WarmupCosine(max(1, steps // 10), steps, 0.0))
    state = MovingAverageState(n, dtype=torch.float32)
    gamma = 1.0 if k == m else cosine_gamma(max(1, steps // 2), params["gamma_floor"])
    order = torch.randperm(n, generator=data)
    position, loss = 0, math.nan
    for step in range(steps):
        if position + b > n:
            order, position = torch.randperm(n, generator=data), 0
        ids = order[position : position + b]
        position += b
        anchors = encoder(AUGMENTATION(images[ids], views))
        positives = encoder(AUGMENTATION(images[ids], views))
        drawn = _step_negatives(regime, sets, ids, k, negatives)
        embedded = encoder(AUGMENTATION(images[drawn.reshape(-1)], negatives))
        embedded = embedded if regime == "shared" else embedded.reshape(b, k, -1)
        value = moving_average_loss(anchors, positives, embedded, ids, state, tau=params["tau"], gamma=gamma)
        loss = float(value.detach())
        if not math.isfinite(loss):
            return {"status": "diverged", "reason": f"loss {loss} at step {step + 1}", "steps": step + 1}
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
        schedule.step()
    encoder.eval()
    result: dict[str, Any] = {"status": "ok", "final_loss": loss, "steps": steps, "k": k}
    result["estimator"] = "exact" if k == m else "fastclip"
    result.update(_scores(encoder, params["bank"], params["n_test"]))
    result["train_s"] = time.perf_counter() - start
    return result
