"""Class accuracy of frozen embeddings: the weighted kNN monitor and the linear probe.

- :func:`knn_accuracy` (the InstDisc / SimCLR kNN monitor): the k train items of highest cosine similarity s_j
  vote for their class with weight exp(s_j / T); the class with the largest total wins;
- :func:`linear_probe_accuracy`: multinomial logistic regression (scikit-learn's objective with C = 1, solved by
  L-BFGS in torch) on standardised features, fit on train, scored on test.

:func:`knn_predictions` and :func:`linear_probe_predictions` give the per-item predictions behind them, from which
:mod:`crl.metrics.class_report` builds intervals and paired differences against a baseline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

from crl._validate import Integer, Integers, check

__all__ = ["knn_accuracy", "knn_predictions", "linear_probe_accuracy", "linear_probe_predictions"]

NORM_FLOOR = 1e-12
"""Floor on a row's norm in :func:`_unit_rows`, so a zero row maps to zero instead of NaN."""


def _unit_rows(z: Tensor) -> Tensor:
    """Each row on the unit sphere: z / max(||z||_2, eps), eps = :data:`NORM_FLOOR` (cosine similarity as a dot)."""
    return z / z.norm(dim=-1, keepdim=True).clamp_min(NORM_FLOOR)


def knn_accuracy(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    *,
    k: int = 20,
    temperature: float = 0.07,
    n_classes: int | None = None,
    chunk_size: int = 512,
) -> float:
    """Weighted kNN accuracy with cosine similarity (Wu et al. 2018, InstDisc; the SimCLR kNN monitor).

    For test item q: s_j = cos(q, t_j) over train items t_j; the top-k j vote with weight exp(s_j / T) for
    label(t_j); the prediction is the class of largest total weight (ties: lowest class index).

    Args:
        train_features: (N, d) memory bank.
        train_labels: (N,) integer labels.
        test_features: (M, d) queries.
        test_labels: (M,) integer labels.
        k: neighbours (at most N).
        temperature: T > 0.
        n_classes: number of classes (default: 1 + the largest label).
        chunk_size: queries per chunk (memory chunk_size x N).

    Returns:
        The fraction of test items whose prediction equals their label.

    Raises:
        ValueError: for an empty test set, a label below 0 or not below ``n_classes``, mismatched shapes, or k
            or T out of range; ``TypeError`` for labels that are not integers.
    """
    classes = _check_test_set(train_features, train_labels, test_features, test_labels, n_classes)
    predicted = knn_predictions(
        train_features,
        train_labels,
        test_features,
        k=k,
        temperature=temperature,
        n_classes=classes,
        chunk_size=chunk_size,
    )
    return float((predicted == test_labels).double().mean())


def knn_predictions(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    *,
    k: int = 20,
    temperature: float = 0.07,
    n_classes: int | None = None,
    chunk_size: int = 512,
) -> Tensor:
    """The (M,) classes predicted by the weighted cosine kNN of :func:`knn_accuracy` for each test item."""
    _check_train_set(train_features, train_labels, test_features, n_classes)
    if not 1 <= k <= train_features.shape[0]:
        raise ValueError(f"k = {k} must be between 1 and the {train_features.shape[0]} train items")
    if temperature <= 0:
        raise ValueError(f"temperature = {temperature} must be > 0")
    classes = n_classes if n_classes is not None else int(train_labels.max()) + 1
    bank = _unit_rows(train_features.float())
    queries = _unit_rows(test_features.float())
    predicted = []
    for start in range(0, queries.shape[0], chunk_size):
        similarity = queries[start : start + chunk_size] @ bank.T
        top, index = similarity.topk(k, dim=1)
        votes = torch.zeros(top.shape[0], classes)
        votes.scatter_add_(1, train_labels[index], torch.exp(top / temperature))
        predicted.append(votes.argmax(dim=1))
    return torch.cat(predicted) if predicted else torch.empty(0, dtype=torch.int64)


def linear_probe_accuracy(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    *,
    max_iter: int = 200,
    n_classes: int | None = None,
) -> float:
    """Accuracy of a multinomial logistic-regression probe on standardised frozen features.

    Features are standardised with the train mean and standard deviation; W, b minimise
    ``(1/N) sum_i CE(softmax(W z_i + b), label_i) + ||W||^2 / (2N)``, which is scikit-learn's
    ``LogisticRegression(C=1)`` objective divided by N (same minimiser), by full-batch L-BFGS (strong Wolfe) in
    float64 for at most ``max_iter`` iterations. Bad input raises as in :func:`knn_accuracy`.
    """
    classes = _check_test_set(train_features, train_labels, test_features, test_labels, n_classes)
    predicted = linear_probe_predictions(
        train_features, train_labels, test_features, max_iter=max_iter, n_classes=classes
    )
    return float((predicted == test_labels).double().mean())


def linear_probe_predictions(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    *,
    max_iter: int = 200,
    n_classes: int | None = None,
) -> Tensor:
    """The (M,) classes predicted by the probe of :func:`linear_probe_accuracy` for each test item.

    The cost is the objective's two (N, D) x (D, C) products per evaluation, run on the caller's torch threads;
    L-BFGS's own steps (dot products and updates of D C numbers, hundreds per iteration) run on one thread,
    where a parallel region's start-up costs more than the work (on a loaded 2-core machine 6.5 ms against
    0.01 ms per dot product of 31,360 numbers). The weights are held as (C, D), so the gradient's product is
    (C, N) x (N, D), the faster orientation for a row-major (N, D) matrix (benchmarks/linear_probe.py).
    """
    _check_train_set(train_features, train_labels, test_features, n_classes)
    classes = n_classes if n_classes is not None else int(train_labels.max()) + 1
    z_train = train_features.double()
    mean, std = z_train.mean(dim=0), z_train.std(dim=0, unbiased=False).clamp_min(1e-12)
    z_train.sub_(mean).div_(std)
    z_test = (test_features.double() - mean) / std
    weight = torch.zeros(classes, z_train.shape[1], dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS(
        [weight, bias],
        max_iter=max_iter,
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
        line_search_fn="strong_wolfe",
    )
    n, threads = z_train.shape[0], torch.get_num_threads()

    def objective() -> Tensor:
        with _torch_threads(threads):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(torch.addmm(bias, z_train, weight.T), train_labels)
            loss = loss + (weight**2).sum() / (2 * n)
            loss.backward()
        return loss

    with _torch_threads(1):
        optimizer.step(objective)
    with torch.no_grad():
        return torch.addmm(bias, z_test, weight.T).argmax(dim=1)


@contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    """Run the block on ``threads`` torch threads, restoring the count after."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _check_labels(name: str, labels: Tensor, length: int, n_classes: int | None) -> None:
    """Raise unless ``labels`` is a 1-D integer tensor of ``length`` classes in 0..n_classes - 1."""
    if not isinstance(labels, Tensor) or labels.dim() != 1 or labels.shape[0] != length:
        shape = tuple(labels.shape) if isinstance(labels, Tensor) else type(labels).__name__
        raise ValueError(f"{name} must be a 1-D tensor of {length} labels (one per feature row), got {shape}")
    check(name, labels, Integers())
    if length and int(labels.min()) < 0:
        raise ValueError(
            f"{name} holds the label {int(labels.min())}; classes are 0, 1, ...: drop the unlabelled items first"
        )
    if n_classes is not None and length and int(labels.max()) >= n_classes:
        raise ValueError(f"{name} holds the label {int(labels.max())}, not below n_classes = {n_classes}")


def _check_train_set(
    train_features: Tensor, train_labels: Tensor, test_features: Tensor, n_classes: int | None
) -> None:
    """Raise unless the features are 2-D of one width and ``train_labels`` labels the train rows."""
    for name, features in (("train_features", train_features), ("test_features", test_features)):
        if not isinstance(features, Tensor) or features.dim() != 2:
            shape = tuple(features.shape) if isinstance(features, Tensor) else type(features).__name__
            raise ValueError(f"{name} must be a 2-D tensor (items, dimensions), got {shape}")
    if test_features.shape[1] != train_features.shape[1]:
        raise ValueError(
            f"test_features has {test_features.shape[1]} dimensions, train_features {train_features.shape[1]};"
            " embed both with the same encoder"
        )
    if n_classes is not None:
        check("n_classes", n_classes, Integer(1, example=" (or None: 1 + the largest label)"))
    _check_labels("train_labels", train_labels, train_features.shape[0], n_classes)


def _check_test_set(
    train_features: Tensor,
    train_labels: Tensor,
    test_features: Tensor,
    test_labels: Tensor,
    n_classes: int | None,
) -> int:
    """The class count (``n_classes``, else 1 + the largest label) once both sets are checked: the test set
    not empty, one integer label in 0..n_classes - 1 per test row."""
    _check_train_set(train_features, train_labels, test_features, n_classes)
    if test_features.shape[0] == 0:
        raise ValueError(
            "test_features has no rows: the accuracy of an empty test set is undefined; pass at least one"
        )
    _check_labels("test_labels", test_labels, test_features.shape[0], n_classes)
    if n_classes is not None:
        return n_classes
    return int(torch.cat([train_labels.long(), test_labels.long()]).max()) + 1
