"""One cell of the m*(n) experiment: a training run through ``crl.train.loop.train``, then the held-out score.

The cell's config comes from :func:`crl.experiments.mstar.design.train_config`; its training pairs from
:func:`crl.train.data.build_source` (locked features through the feature cache, or fresh views of images), and it
is scored on the fixed test split of its data set's locked features by :mod:`crl.train.locked_heldout` (WordNet:
nDCG@10 primary, MRR@10, recall@k and accuracy@1 beside; Fashion-MNIST: two-view recall@1 primary, class retrieval
accuracy@1 beside).

The baseline cell scores the backbone's features themselves (f = g = identity; pixels centred by the test
anchors' mean, the same shift on both sides). A NaN or infinite training loss ends the cell as ``status =
"diverged"`` with its reason; it is counted in the summary, never used as a metric value.

:func:`cell_set_overlap` measures how much the fixed negative sets of a cell's anchors overlap (SCRL's S_i are
about m / C alike; SSCRL's pool is one set), from the very sampler the cell trains with.

Besides the scores a cell records its mean training loss per complete epoch of the data cursor:
``last_epoch_change`` = the last epoch's mean - the one before's, and ``loss_drop`` = the first epoch's mean - the
last's (None with fewer than two complete epochs); the convergence check of docs/claims/C6_real.md is
|last_epoch_change| < 1% of loss_drop (the gcl loss can be of either sign, so the change is read against the drop).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from crl.data import PairSource
from crl.experiments.mstar.design import train_config
from crl.negatives.fixed import FixedPool, FixedSets, SetOverlap, set_overlap
from crl.sweep import Cell
from crl.train.build import NEGATIVE_KINDS, Streams
from crl.train.config import DataConfig
from crl.train.data import build_source
from crl.train.locked_heldout import HeldOut, identity_scores, load_heldout, score
from crl.train.loop import StepMetrics, train

__all__ = ["OVERLAP_ROWS", "cell_set_overlap", "compute_cell", "epoch_losses", "run_cell"]


def epoch_losses(metrics: Sequence[StepMetrics]) -> list[float]:
    """The mean training loss of each complete epoch of the data cursor, in order (a last epoch with fewer steps
    than the first is left out)."""
    by_epoch: dict[int, list[float]] = {}
    for row in metrics:
        by_epoch.setdefault(row.epoch, []).append(row.loss)
    groups = [values for _, values in sorted(by_epoch.items())]
    complete = [values for values in groups if len(values) == len(groups[0])]
    return [sum(values) / len(values) for values in complete]


@functools.lru_cache(maxsize=2)
def _source(data: DataConfig) -> PairSource:
    """The training pairs of ``[data]``, loaded once per worker process for every cell of the same data (the
    locked and the image sources read no seed: their features or images are fixed)."""
    return build_source(data, seed=0)


def _backbone(params: Mapping[str, Any], heldout: HeldOut) -> dict[str, Any]:
    """The baseline: the features themselves, normalised (pixels centred first)."""
    return {"status": "ok", **identity_scores(heldout, params["heldout"]["backbone"])}


def run_cell(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Train the cell's config (or take the backbone for the baseline) and score it on the fixed test split.

    Returns:
        ``status`` ("ok" or "diverged" with ``reason``), the metrics of :func:`score`, ``final_loss``,
        ``epoch_loss`` (per cursor epoch), ``last_epoch_change``, ``loss_drop``, ``steps`` and ``train_s``.
    """
    spec = params["heldout"]
    heldout = load_heldout(spec["dataset"], spec["backbone"], spec["backbone_path"], int(spec["n_test"]))
    if params["arm"] == "backbone":
        return _backbone(params, heldout)
    config = train_config(params, seed)
    start = time.perf_counter()
    try:
        outcome = train(config, _source(config.data), Streams.derive(seed, regime=config.loss.regime))
    except FloatingPointError as error:
        return {"status": "diverged", "reason": str(error)}
    seconds = time.perf_counter() - start
    model = outcome.model.eval()
    with torch.no_grad():
        scores = score(heldout, model.encode_anchors, model.encode_positives)
    losses = epoch_losses(outcome.metrics)
    return {
        "status": "ok",
        **scores,
        "final_loss": outcome.metrics[-1].loss,
        "epoch_loss": losses,
        "last_epoch_change": losses[-1] - losses[-2] if len(losses) > 1 else None,
        "loss_drop": losses[0] - losses[-1] if len(losses) > 1 else None,
        "steps": len(outcome.metrics),
        "train_s": seconds,
    }


def compute_cell(cell: Cell) -> dict[str, Any]:
    """:func:`run_cell` of a sweep cell (module-level, so process-pool and Ray workers can run it)."""
    return run_cell(cell.params, cell.seed)


OVERLAP_ROWS = 64
"""Anchors whose sets :func:`cell_set_overlap` compares (64 * 63 / 2 = 2,016 pairs)."""


def cell_set_overlap(params: Mapping[str, Any], seed: int, rows: int = OVERLAP_ROWS) -> SetOverlap:
    """The pairwise overlap |S_i & S_k| / m of the fixed negative sets of ``rows`` anchors spread evenly over the
    cell's n training pairs, with the sampler the cell's training builds (:func:`crl.negatives.fixed.set_overlap`).

    Raises:
        ValueError: if the cell's negatives are not fixed sets or a fixed pool.
    """
    config = train_config(params, seed)
    sampler = NEGATIVE_KINDS[config.loss.negatives].sampler(config, _source(config.data), False)
    if not isinstance(sampler, FixedSets | FixedPool):
        raise ValueError(
            f"[loss] negatives = '{config.loss.negatives}' has no fixed sets to compare; the overlap is defined for "
            "fixed_sets (SCRL) and fixed_pool (SSCRL)"
        )
    n = int(params["n"])
    anchors = torch.linspace(0, n - 1, min(n, rows)).round().to(torch.int64).unique()
    return set_overlap(sampler, anchors)
