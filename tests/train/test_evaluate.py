"""crl eval: the kNN monitor and the linear probe against scikit-learn, and retrieval against a brute force."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from crl.commands.evaluate import eval_command
from crl.evaluate import (
    embed,
    knn_accuracy,
    linear_probe_accuracy,
    load_trained_model,
    resolve_checkpoint,
)
from crl.train.data import heldout_pairs
from tests.train.helpers import fit, tiny_config


def _clusters(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(4, (n,), generator=generator)
    centres = torch.randn(4, 6, generator=torch.Generator().manual_seed(99))
    return centres[labels] + 0.9 * torch.randn(n, 6, generator=generator), labels


@pytest.mark.parametrize("k", [1, 5, 20])
def test_knn_matches_sklearn_with_exponential_cosine_weights(k: int) -> None:
    """InstDisc's weighted kNN = sklearn's brute-force cosine kNN with weights exp((1 - distance) / T)."""
    train_x, train_y = _clusters(300, 0)
    test_x, test_y = _clusters(200, 1)
    temperature = 0.07
    reference = KNeighborsClassifier(
        n_neighbors=k, metric="cosine", algorithm="brute", weights=lambda d: np.exp((1.0 - d) / temperature)
    ).fit(train_x.double().numpy(), train_y.numpy())
    expected = reference.score(test_x.double().numpy(), test_y.numpy())
    ours = knn_accuracy(
        train_x, train_y, test_x, test_y, k=k, temperature=temperature, n_classes=4, chunk_size=64
    )
    assert ours == pytest.approx(expected, abs=1.0 / 200 + 1e-12)


def test_linear_probe_matches_sklearn_logistic_regression() -> None:
    """The torch L-BFGS probe minimises sklearn's C = 1 objective: the test accuracies must agree."""
    train_x, train_y = _clusters(400, 2)
    test_x, test_y = _clusters(300, 3)
    reference = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000, tol=1e-10))
    expected = reference.fit(train_x.double().numpy(), train_y.numpy()).score(
        test_x.double().numpy(), test_y.numpy()
    )
    ours = linear_probe_accuracy(train_x, train_y, test_x, test_y, max_iter=500, n_classes=4)
    assert ours == pytest.approx(expected, abs=2.0 / 300)


def test_bad_knn_arguments_raise() -> None:
    """k beyond the bank or a non-positive temperature must be rejected with the value in the message."""
    x, y = _clusters(10, 0)
    with pytest.raises(ValueError, match="k = 11"):
        knn_accuracy(x, y, x, y, k=11)
    with pytest.raises(ValueError, match="temperature = 0"):
        knn_accuracy(x, y, x, y, k=5, temperature=0.0)


def test_eval_of_a_tiny_run_matches_a_brute_force_recall(tmp_path: Path) -> None:
    """recall@1 of crl eval must equal the share of held-out anchors whose best-scoring positive is their own."""
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
    brute_recall = float(
        ((scores >= own).sum(dim=1) == 1).double().mean()
    )  # ties count against (pessimistic)
    assert step == written["step"] == 10 and written["n_queries"] == written["gallery_size"] == 359
    assert written["recall@1"] == pytest.approx(brute_recall, abs=1e-9)
    assert 0.0 <= written["knn_accuracy"] <= 1.0 and 0.0 <= written["probe_accuracy"] <= 1.0
