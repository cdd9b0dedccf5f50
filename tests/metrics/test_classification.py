"""The kNN monitor and the linear probe of crl.metrics.classification against scikit-learn."""

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from crl.metrics.classification import knn_accuracy, linear_probe_accuracy, linear_probe_predictions


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


@pytest.mark.parametrize("threads", [1, 2])
def test_the_probe_predicts_as_sklearn_per_item_and_keeps_the_thread_count(threads: int) -> None:
    """Item by item the probe predicts the class sklearn's C = 1 logistic regression predicts (the same
    minimiser), with its products on ``threads`` threads and L-BFGS's own steps on one, and leaves torch's
    thread count as it found it: if this fails, the faster probe solves another problem, or crl eval changes
    the threads of what follows it."""
    generator = torch.Generator().manual_seed(5)
    labels = torch.randint(8, (900,), generator=generator)
    centres = torch.randn(8, 40, generator=generator)
    features = 0.4 * centres[labels] + torch.randn(900, 40, generator=generator)
    reference = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=5000, tol=1e-12))
    expected = reference.fit(features[:600].double().numpy(), labels[:600].numpy())
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ours = linear_probe_predictions(
            features[:600], labels[:600], features[600:], max_iter=500, n_classes=8
        )
        assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    agree = (ours.numpy() == expected.predict(features[600:].double().numpy())).mean()
    assert agree >= 298 / 300


def test_bad_knn_arguments_raise() -> None:
    """k beyond the bank or a non-positive temperature must be rejected with the value in the message."""
    x, y = _clusters(10, 0)
    with pytest.raises(ValueError, match="k = 11"):
        knn_accuracy(x, y, x, y, k=11)
    with pytest.raises(ValueError, match="temperature = 0"):
        knn_accuracy(x, y, x, y, k=5, temperature=0.0)
