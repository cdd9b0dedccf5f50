"""The kNN monitor and the linear probe of crl.metrics.classification against scikit-learn."""

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from crl.metrics.classification import knn_accuracy, linear_probe_accuracy


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
