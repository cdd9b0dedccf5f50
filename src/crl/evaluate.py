"""Held-out evaluation of a trained checkpoint: the logic behind ``crl eval CHECKPOINT``.

Retrieval ([A]'s criterion E(s) and the usual ranking metrics): every held-out anchor f(x_i) queries the
gallery of all held-out positives g(y_j) by the score s = <f(x), g(y)>; its positive is y_i (index-matched).
Fashion-MNIST: the 10,000 test images, as two augmented views drawn once with a generator seeded by
``eval.seed``, or as left/right halves. The metrics (recall@k, MRR, nDCG@k, MAP, AUC with standard errors) come
from :func:`crl.metrics.retrieval.retrieval_metrics`.

Class accuracy (labelled data): embeddings f(x) of the anchor view of every train and test image (the clean
image for two views, the left half for halves), then

- weighted kNN (the InstDisc / SimCLR kNN monitor): the k train items of highest cosine similarity s_j vote
  for their class with weight exp(s_j / T); the class with the largest total wins;
- linear probe: multinomial logistic regression (scikit-learn's objective with C = 1, solved by L-BFGS in
  torch) on standardised features, fit on train, scored on test.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from crl.metrics.retrieval import RetrievalReport, retrieval_metrics
from crl.models import DualEncoder, project_to_sphere
from crl.train.build import build_model, derive_generator
from crl.train.checkpoint import load_checkpoint, newest_checkpoint
from crl.train.config import TrainConfig, parse_config
from crl.train.data import heldout_pairs, labelled_inputs

__all__ = [
    "EvalResult",
    "embed",
    "evaluate_checkpoint",
    "knn_accuracy",
    "linear_probe_accuracy",
    "load_trained_model",
    "resolve_checkpoint",
]


@dataclass(frozen=True)
class EvalResult:
    """Held-out figures of one checkpoint.

    Attributes:
        checkpoint: the safetensors file evaluated.
        step: its training step.
        retrieval: held-out two-view (or halves, or synthetic) retrieval metrics.
        knn_accuracy: weighted kNN class accuracy on the test split, or ``None`` without labels.
        probe_accuracy: linear-probe accuracy, or ``None`` (no labels, or the probe is off).
    """

    checkpoint: Path
    step: int
    retrieval: RetrievalReport
    knn_accuracy: float | None
    probe_accuracy: float | None

    def as_dict(self) -> dict[str, Any]:
        """A flat JSON-able dict (the content of eval.json)."""
        out: dict[str, Any] = {
            "checkpoint": str(self.checkpoint),
            "step": self.step,
            "n_queries": self.retrieval.n_queries,
            "gallery_size": self.retrieval.gallery_size,
        }
        out.update(self.retrieval.as_flat_dict())
        out["knn_accuracy"] = self.knn_accuracy
        out["probe_accuracy"] = self.probe_accuracy
        return out


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint path: the file itself, or the newest checkpoint of a run folder.

    Raises:
        FileNotFoundError: if nothing usable is there.
    """
    path = Path(path)
    if path.is_dir():
        folder = path / "checkpoints" if (path / "checkpoints").is_dir() else path
        newest = newest_checkpoint(folder)
        if newest is None:
            raise FileNotFoundError(
                f"no complete checkpoint in {str(folder)!r}; train first (crl train CONFIG)"
            )
        return newest
    if not path.with_suffix(".safetensors").is_file():
        raise FileNotFoundError(
            f"checkpoint {str(path)!r} does not exist; pass a step-*.safetensors file or a run folder"
        )
    return path.with_suffix(".safetensors")


def load_trained_model(path: str | Path, device: torch.device) -> tuple[DualEncoder, TrainConfig, int]:
    """Rebuild the model of a checkpoint from its saved config and load its weights (eval mode).

    Returns:
        (model, config, step).
    """
    checkpoint = load_checkpoint(resolve_checkpoint(path))
    config = parse_config(checkpoint.state["config"], source=f"{checkpoint.path} (saved config)")
    anchor_shape = tuple(checkpoint.state["anchor_shape"])
    positive_shape = tuple(checkpoint.state["positive_shape"])
    model = build_model(
        config.model, config.loss, anchor_shape, positive_shape, derive_generator(0, "eval-init")
    )
    weights = {k.removeprefix("model."): v for k, v in checkpoint.tensors.items() if k.startswith("model.")}
    model.load_state_dict(weights)
    return model.to(device).eval(), config, checkpoint.step


@torch.no_grad()
def embed(
    encode: Callable[[Tensor], Tensor], inputs: Tensor, *, batch_size: int, device: torch.device
) -> Tensor:
    """Apply an encoder to ``inputs`` in batches; returns float32 embeddings on the CPU, (N, d)."""
    parts = [
        encode(inputs[start : start + batch_size].to(device)).float().cpu()
        for start in range(0, inputs.shape[0], batch_size)
    ]
    return torch.cat(parts)


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
    """
    if not 1 <= k <= train_features.shape[0]:
        raise ValueError(f"k = {k} must be between 1 and the {train_features.shape[0]} train items")
    if temperature <= 0:
        raise ValueError(f"temperature = {temperature} must be > 0")
    classes = n_classes if n_classes is not None else int(max(train_labels.max(), test_labels.max())) + 1
    bank = project_to_sphere(train_features.float())
    queries = project_to_sphere(test_features.float())
    correct = 0
    for start in range(0, queries.shape[0], chunk_size):
        similarity = queries[start : start + chunk_size] @ bank.T
        top, index = similarity.topk(k, dim=1)
        votes = torch.zeros(top.shape[0], classes)
        votes.scatter_add_(1, train_labels[index], torch.exp(top / temperature))
        correct += int((votes.argmax(dim=1) == test_labels[start : start + chunk_size]).sum())
    return correct / queries.shape[0]


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
    float64 for at most ``max_iter`` iterations.
    """
    classes = n_classes if n_classes is not None else int(max(train_labels.max(), test_labels.max())) + 1
    train = train_features.double()
    mean, std = train.mean(dim=0), train.std(dim=0, unbiased=False).clamp_min(1e-12)
    z_train, z_test = (train - mean) / std, (test_features.double() - mean) / std
    weight = torch.zeros(z_train.shape[1], classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS(
        [weight, bias],
        max_iter=max_iter,
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
        line_search_fn="strong_wolfe",
    )
    n = z_train.shape[0]

    def objective() -> Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(z_train @ weight + bias, train_labels)
        loss = loss + (weight**2).sum() / (2 * n)
        loss.backward()
        return loss

    optimizer.step(objective)
    with torch.no_grad():
        predictions = (z_test @ weight + bias).argmax(dim=1)
    return float((predictions == test_labels).double().mean())


def evaluate_checkpoint(path: str | Path, *, device: str = "auto") -> EvalResult:
    """Evaluate a checkpoint (or a run folder's newest) on the held-out split of its config's data.

    Uses the run's ``run.num_threads`` torch threads when it sets them.
    """
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device = {device!r} is not known; use 'auto', 'cpu' or 'cuda'")
    chosen = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)
    checkpoint_path = resolve_checkpoint(path)
    model, config, step = load_trained_model(checkpoint_path, chosen)
    if config.run.num_threads > 0:
        torch.set_num_threads(config.run.num_threads)
    batch = config.eval.batch_size
    pairs = heldout_pairs(config)
    queries = embed(model.encode_anchors, pairs.x, batch_size=batch, device=chosen)
    gallery = embed(model.encode_positives, pairs.y, batch_size=batch, device=chosen)
    retrieval = retrieval_metrics(
        queries, gallery, positive_index=torch.arange(queries.shape[0]), ks=config.eval.ks
    )
    knn, probe = _class_accuracy(model, config, chosen)
    return EvalResult(checkpoint_path, step, retrieval, knn, probe)


def _class_accuracy(
    model: DualEncoder, config: TrainConfig, device: torch.device
) -> tuple[float | None, float | None]:
    train, test = labelled_inputs(config.data, "train"), labelled_inputs(config.data, "test")
    if train is None or test is None:
        return None, None
    batch = config.eval.batch_size
    train_features = embed(model.encode_anchors, train.inputs, batch_size=batch, device=device)
    test_features = embed(model.encode_anchors, test.inputs, batch_size=batch, device=device)
    knn = knn_accuracy(
        train_features,
        train.labels,
        test_features,
        test.labels,
        k=min(config.eval.knn_k, train_features.shape[0]),
        temperature=config.eval.knn_temperature,
        n_classes=train.n_classes,
    )
    probe = None
    if config.eval.linear_probe:
        probe = linear_probe_accuracy(
            train_features,
            train.labels,
            test_features,
            test.labels,
            max_iter=config.eval.probe_max_iter,
            n_classes=train.n_classes,
        )
    return knn, probe
