"""Hard negatives mined from an index: the brute-force filter, harder than random, no positives, in training."""

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from crl.data.fashion_mnist import load_fashion_mnist
from crl.negatives import EmbeddedBatch
from crl.negatives.mining import Mined, mine_hard_negatives
from crl.search import Index
from tests.negatives._bank_worker import bank_worker
from tests.train.helpers import fit, tiny_config

N_ITEMS = 1500
WINDOW = (10, 100)


@pytest.fixture(scope="module")
def fashion() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items: normalised pixels of 1500 Fashion-MNIST training images; anchors: the same images plus noise."""
    images = load_fashion_mnist("train")
    pixels = images.images[:N_ITEMS].reshape(N_ITEMS, -1).numpy().astype(np.float64)
    rng = np.random.default_rng(0)
    anchors = pixels + 0.05 * rng.standard_normal(pixels.shape)
    return pixels, anchors, images.labels[:N_ITEMS].numpy()


def brute_force(items, anchors, labels, margin):  # type: ignore[no-untyped-def]
    """Float64 reference: ranks 10..100 of each anchor by cosine, filtered as mine_hard_negatives states."""
    unit = items / np.linalg.norm(items, axis=1, keepdims=True)
    query = anchors / np.linalg.norm(anchors, axis=1, keepdims=True)
    scores = query @ unit.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, WINDOW[0] - 1 : WINDOW[1]]
    kept = []
    for i, row in enumerate(order):
        positive = scores[i, i]
        kept.append(
            {int(j) for j in row if j != i and labels[j] != labels[i] and scores[i, j] <= positive - margin}
        )
    return kept


def test_mined_negatives_match_a_float64_brute_force(fashion) -> None:  # type: ignore[no-untyped-def]
    items, anchors, labels = fashion
    index = Index.build(items, kind="flat")
    mined = mine_hard_negatives(
        index, anchors[:200], items[:200], np.arange(200), window=WINDOW, margin=0.01, labels=labels
    )
    reference = brute_force(items, anchors[:200], labels, 0.01)
    agree = [set(row[row >= 0].tolist()) == ref for row, ref in zip(mined.ids, reference, strict=True)]
    assert np.mean(agree) >= 0.98  # float32 vs float64 may swap items at the window's edges
    assert mined.ids.shape == (200, WINDOW[1] - WINDOW[0] + 1)


def test_mined_negatives_are_harder_than_random_and_hold_no_positive(fashion) -> None:  # type: ignore[no-untyped-def]
    items, anchors, labels = fashion
    index = Index.build(items, kind="hnsw")
    positive_ids = np.arange(N_ITEMS)
    mined = mine_hard_negatives(index, anchors, items, positive_ids, window=WINDOW, labels=labels)
    kept = mined.ids >= 0
    assert kept.sum(axis=1).mean() > 10
    assert not (mined.ids == positive_ids[:, None]).any()
    assert not (kept & (labels[np.maximum(mined.ids, 0)] == labels[:, None])).any()
    assert (mined.scores[kept] <= np.repeat(mined.positive_scores, kept.sum(axis=1))).all()
    rng = np.random.default_rng(1)
    random_ids = rng.integers(0, N_ITEMS, size=(N_ITEMS, 20))
    unit = items / np.linalg.norm(items, axis=1, keepdims=True)
    query = anchors / np.linalg.norm(anchors, axis=1, keepdims=True)
    random_scores = np.einsum("id,ikd->ik", query, unit[random_ids])
    assert mined.scores[kept].mean() > random_scores.mean() + 0.1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"window": (0, 10)}, "window"),
        ({"window": (5, 2)}, "window"),
        ({"window": 10}, "window"),
        ({"margin": float("nan")}, "margin"),
        ({"labels": np.zeros(3, dtype=np.int64)}, "labels"),
        ({"labels": np.zeros((40, 2), dtype=np.int64)}, "labels"),
        ({"positive_ids": np.zeros(3)}, "positive_ids"),
        ({"positives": np.ones((2, 4))}, "positives"),
        ({"anchors": np.full((5, 4), np.nan)}, "anchors"),
        ({"window": (41, 50)}, "rank 41"),
    ],
)
def test_bad_mining_input_is_named(kwargs: dict, match: str) -> None:
    vectors = np.random.default_rng(0).standard_normal((40, 4)).astype(np.float32)
    args = {"anchors": vectors[:5], "positives": vectors[:5], "positive_ids": np.arange(5)} | kwargs
    with pytest.raises(ValueError, match=match):
        mine_hard_negatives(Index.build(vectors), **args)


def test_sampler_draws_mined_indices_after_a_refresh() -> None:
    """Before the first refresh the sampler draws uniform indices; after it, each anchor's own mined ones."""
    rng = torch.Generator().manual_seed(0)
    vectors = torch.nn.functional.normalize(torch.randn(64, 8, generator=rng), dim=1)
    labels = torch.arange(64) % 4
    sampler = Mined(64, 8, 5, window=(2, 20), refresh_every=1, labels=labels)
    batch = EmbeddedBatch(vectors, vectors, indices=torch.arange(64))
    assert sampler.draw(batch, rng).y.shape == (64, 5)
    sampler.update(batch)
    drawn = sampler.draw(batch, rng).y
    assert drawn.shape == (64, 5)
    assert not (labels[drawn] == labels[:, None]).any()
    state = sampler.state_dict()
    again = Mined(64, 8, 5, window=(2, 20), refresh_every=1, labels=labels)
    again.load_state_dict(state)
    assert torch.equal(
        again.draw(batch, torch.Generator().manual_seed(3)).y,
        sampler.draw(batch, torch.Generator().manual_seed(3)).y,
    )
    with pytest.raises(ValueError, match="keys"):
        again.load_state_dict({"memory": state["memory"]})


def test_training_with_mined_negatives_checkpoints_the_memory_bank(tmp_path: Path) -> None:
    loss = {
        "negatives": "mined",
        "n_negatives": 8,
        "symmetric": False,
        "mine_refresh_every": 3,
        "mine_window": [2, 30],
    }
    config = tiny_config(tmp_path, "mined", loss=loss, optim={"total_steps": 8, "warmup_steps": 2})
    result = fit(config)
    tensors = load_file(str(result.checkpoint))
    assert tensors["sampler.memory"].shape[1] == 16 and bool(tensors["sampler.filled"].any())
    assert int(tensors["sampler.steps"]) == 8 and tensors["sampler.snapshot_ids"].numel() > 0


@pytest.mark.distributed
def test_two_ranks_keep_the_same_memory_bank(tmp_path: Path) -> None:
    """Each gloo rank writes its half of the batch; both banks must hold all 8 positives."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    outs = [str(tmp_path / f"rank{rank}.pt") for rank in range(2)]
    workers = [
        context.Process(target=bank_worker, args=(rank, str(tmp_path / "store"), outs[rank]))
        for rank in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0, 0]
    expected = torch.arange(8 * 3, dtype=torch.float32).reshape(8, 3)
    for out in outs:
        state = torch.load(out)
        assert torch.equal(state["memory"], expected) and bool(state["filled"].all())
        assert torch.equal(state["snapshot_ids"], torch.arange(8))
