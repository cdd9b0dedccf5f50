"""crl eval: held-out retrieval of a trained run against a brute force."""

import json
from pathlib import Path

import pytest
import torch

from crl.commands.evaluate import eval_command
from crl.models import embed
from crl.serving.evaluate import load_trained_model, resolve_checkpoint, smallest_relevant
from crl.train.data import heldout_pairs
from tests.train.helpers import fit, tiny_config


def test_eval_of_a_tiny_run_matches_a_brute_force_accuracy(tmp_path: Path) -> None:
    """accuracy@1 of crl eval must equal the share of held-out anchors whose best-scoring positive is their own."""
    config = tiny_config(tmp_path, "eval", optim={"total_steps": 10, "warmup_steps": 2})
    result = fit(config)
    assert resolve_checkpoint(config.run_dir) == result.checkpoint
    assert eval_command(config.run_dir, device="cpu") == 0
    written = json.loads((config.run_dir / "eval.json").read_text())
    model, _, step = load_trained_model(result.checkpoint, torch.device("cpu"))
    pairs = heldout_pairs(config)
    queries = embed(model.encode_anchors, pairs.x, batch_size=50, device=torch.device("cpu")).double()
    gallery = embed(model.encode_positives, pairs.y, batch_size=50, device=torch.device("cpu")).double()
    scores = queries @ gallery.T
    own = scores.diagonal().unsqueeze(1)
    brute_accuracy = float(
        ((scores >= own).sum(dim=1) == 1).double().mean()
    )  # ties count against (pessimistic)
    assert step == written["step"] == 10 and written["n_queries"] == written["gallery_size"] == 359
    assert written["accuracy@1"] == pytest.approx(brute_accuracy, abs=1e-9)
    assert written["recall@1"] == written["accuracy@1"]  # one positive per query: the same number
    assert 0.0 < written["class_ndcg@10"] <= 1.0 and 0.0 < written["class_map@100"] <= 1.0
    assert 0.0 <= written["knn_accuracy"] <= 1.0 and 0.0 <= written["probe_accuracy"] <= 1.0


def test_smallest_relevant_counts_the_gallery_items_of_the_query_classes_only() -> None:
    """Gallery classes 0:3, 1:1, 2:5 items; queries of classes 0 and 2 (and 7, absent from the gallery) -> 3."""
    gallery = torch.tensor([0, 0, 0, 1, 2, 2, 2, 2, 2])
    assert smallest_relevant(gallery, torch.tensor([2, 0, 7, 0])) == 3
    assert smallest_relevant(gallery, torch.tensor([1, 2])) == 1
