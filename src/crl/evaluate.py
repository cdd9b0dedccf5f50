"""Held-out evaluation of a trained checkpoint: the logic behind ``crl eval CHECKPOINT``.

Retrieval ([A]'s criterion E(s) and the usual ranking metrics): every held-out anchor f(x_i) queries the
gallery of all held-out positives g(y_j) by the score s = <f(x), g(y)>; its positive is y_i (index-matched).
Fashion-MNIST: the 10,000 test images, as two augmented views drawn once with a generator seeded by
``eval.seed``, or as left/right halves. The metrics (recall@k, MRR, nDCG@k, MAP, AUC with standard errors) come
from :func:`crl.metrics.retrieval.retrieval_metrics`.

Class accuracy (labelled data): embeddings f(x) (:func:`crl.models.embed`) of the anchor view of every train and
test image (the clean image for two views, the left half for halves), scored by the weighted kNN monitor and the
linear probe of :mod:`crl.metrics.classification`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from crl.metrics.classification import knn_accuracy, linear_probe_accuracy
from crl.metrics.retrieval import RetrievalReport, retrieval_metrics
from crl.models import DualEncoder, embed
from crl.train.build import build_model, derive_generator
from crl.train.checkpoint import load_train_state, newest_checkpoint
from crl.train.config import TrainConfig
from crl.train.data import heldout_pairs, labelled_inputs

__all__ = ["EvalResult", "evaluate_checkpoint", "load_trained_model", "resolve_checkpoint"]


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
    state = load_train_state(resolve_checkpoint(path))
    config = state.config
    model = build_model(
        config.model, config.loss, state.anchor_shape, state.positive_shape, derive_generator(0, "eval-init")
    )
    model.load_state_dict(state.model)
    return model.to(device).eval(), config, state.step


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
