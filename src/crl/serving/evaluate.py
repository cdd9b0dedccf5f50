"""Held-out evaluation of a trained checkpoint: the logic behind ``crl eval CHECKPOINT``.

Retrieval ([A]'s criterion E(s) and the usual ranking metrics): every held-out anchor f(x_i) queries the
gallery of all held-out positives g(y_j) by the score s = <f(x), g(y)>; its positive is y_i (index-matched).
Fashion-MNIST: the 10,000 test images, as two augmented views drawn once with a generator seeded by
``eval.seed``, or as left/right halves; your own arrays (``source = "arrays"``): their held-out pairs. The
metrics (accuracy@k, MRR, nDCG@k, MAP, AUC with standard errors) come from
:func:`crl.metrics.retrieval.retrieval_metrics`. Class retrieval (labelled data): each test image f(x) queries the
other test images, those of its class relevant (:func:`crl.metrics.ir.class_retrieval`: accuracy, precision
and recall@k, MRR@10, nDCG@10, MAP@100 as sentence-transformers defines them).

Class accuracy (labelled data): embeddings f(x) (:func:`crl.models.embed`) of the anchor view of every train and
test image (the clean image for two views, the left half for halves), scored by the weighted kNN monitor and the
linear probe of :mod:`crl.metrics.classification`; skipped, with a note, for data without labels. Beside them
(:mod:`crl.metrics.class_report`, 95% intervals): the same two on the backbone features h before the projection
head (SimCLR's evaluation; encoders with a ``representation`` method) and on the raw centred inputs, the baseline
that a learned representation must beat, with each row's paired difference from that baseline.

A text run (``[data] source = "wordnet" | "bible" | "text_pairs"``) is evaluated by retrieval with qrels, on
its test split or on your own queries, corpus and qrels, beside the model it started from
(:mod:`crl.serving.text_evaluate`); the models are rebuilt by :mod:`crl.serving.trained`.

:func:`embed_array` embeds any array with a checkpoint's anchor or positive tower (``crl embed``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from crl.data.text import RetrievalTask
from crl.metrics.class_report import PIXELS, ClassRow, centred_pixels, class_report
from crl.metrics.ir import DEFAULT_KS, capped_ks, class_retrieval
from crl.metrics.retrieval import RetrievalReport, retrieval_metrics
from crl.models import DualEncoder, embed
from crl.serving.text_evaluate import TextEvalResult, evaluate_text_state
from crl.serving.trained import load_trained_model, model_of_state, torch_device
from crl.train.checkpoint import load_train_state, resolve_checkpoint
from crl.train.config import TextData, TrainConfig
from crl.train.data import data_kind, heldout_pairs, labelled_inputs

__all__ = [
    "EvalResult",
    "Tower",
    "embed_array",
    "evaluate_checkpoint",
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
        notes: why a figure was skipped, one line each (e.g. data without labels).
        classes: kNN and probe rows of the embedding, the backbone features and the raw-pixel baseline, with
            intervals and differences from the baseline (empty without labels).
        class_retrieval: IR metrics of class retrieval on the test split (``ndcg@10``, ...), or ``None``.
    """

    checkpoint: Path
    step: int
    retrieval: RetrievalReport
    knn_accuracy: float | None
    probe_accuracy: float | None
    notes: tuple[str, ...] = ()
    classes: tuple[ClassRow, ...] = ()
    class_retrieval: dict[str, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        """A flat JSON-able dict (the content of eval.json)."""
        out: dict[str, Any] = {
            "checkpoint": str(self.checkpoint),
            "step": self.step,
            "n_queries": self.retrieval.n_queries,
            "gallery_size": self.retrieval.gallery_size,
        }
        out.update(self.retrieval.as_flat_dict())
        out.update({f"class_{name}": value for name, value in (self.class_retrieval or {}).items()})
        out["knn_accuracy"] = self.knn_accuracy
        out["probe_accuracy"] = self.probe_accuracy
        for row in self.classes:
            out.update(_class_row_dict(row))
        return out


def _class_row_dict(row: ClassRow) -> dict[str, Any]:
    """``{features}_{method}_accuracy``, its interval, and the difference from pixels with its interval."""
    name = f"{row.features}_{row.method}"
    out: dict[str, Any] = {
        f"{name}_accuracy": row.interval.accuracy,
        f"{name}_ci": [row.interval.low, row.interval.high],
    }
    if row.vs_pixels is not None:
        out[f"{name}_minus_pixels"] = row.vs_pixels.difference
        out[f"{name}_minus_pixels_ci"] = [row.vs_pixels.low, row.vs_pixels.high]
        out[f"{name}_beats_pixels"] = row.beats_pixels
    return out


def evaluate_checkpoint(
    path: str | Path,
    *,
    device: str = "auto",
    task: RetrievalTask | None = None,
    task_name: str = "your queries, corpus and qrels",
    text_only: Sequence[str] = (),
) -> EvalResult | TextEvalResult:
    """Evaluate a checkpoint (or a run folder's newest) on the held-out split of its config's data; a text run
    by retrieval beside its starting model (:mod:`crl.serving.text_evaluate`), on its test split or on ``task``
    (your own queries, corpus and qrels, named ``task_name``).

    Uses the run's ``run.num_threads`` torch threads when it sets them.

    Raises:
        ValueError: if ``task`` or ``text_only`` (the options given that only a text run takes, e.g.
            ``["--trec-run"]``) is given for a run that is not a text run, before anything is computed.
    """
    chosen = torch_device(device)
    checkpoint_path = resolve_checkpoint(path)
    state = load_train_state(checkpoint_path)
    config = state.config
    if config.run.num_threads > 0:
        torch.set_num_threads(config.run.num_threads)
    if isinstance(config.data, TextData):
        return evaluate_text_state(state, checkpoint_path, chosen, task=task, task_name=task_name)
    if task is not None or text_only:
        given = ", ".join(text_only) or "a task of your own"
        raise ValueError(
            f"{given}: only a text run takes these; this run's [data] source = {config.data.source!r} is "
            "evaluated on its held-out pairs, so drop them"
        )
    model = model_of_state(state, chosen)
    batch = config.eval.batch_size
    pairs = heldout_pairs(config)
    queries = embed(model.encode_anchors, pairs.x, batch_size=batch, device=chosen)
    gallery = embed(model.encode_positives, pairs.y, batch_size=batch, device=chosen)
    retrieval = retrieval_metrics(
        queries, gallery, positive_index=torch.arange(queries.shape[0]), ks=config.eval.ks
    )
    classes = _class_rows(model, config, chosen)
    knn, probe = _embedding_accuracy(classes, "knn"), _embedding_accuracy(classes, "probe")
    notes = () if classes else (_no_labels_note(config),)
    class_ir = _class_retrieval(model, config, chosen)
    return EvalResult(
        checkpoint_path, state.step, retrieval, knn, probe, notes, tuple(classes), class_retrieval=class_ir
    )


def _embedding_accuracy(rows: list[ClassRow], method: str) -> float | None:
    """The accuracy of the embedding f(x) by ``method``, or None when it was not computed."""
    found = [row.interval.accuracy for row in rows if row.features == "embedding" and row.method == method]
    return found[0] if found else None


def _class_retrieval(
    model: DualEncoder, config: TrainConfig, device: torch.device
) -> dict[str, float] | None:
    """IR metrics of class retrieval within the labelled test split (None without labels, or when no two test
    items share a label); cut-offs above the n - 1 other items are lowered to n - 1."""
    test = labelled_inputs(config.data, "test")
    if test is None or len(test.labels) < 2 or int(torch.bincount(test.labels).max()) < 2:
        return None
    features = embed(model.encode_anchors, test.inputs, batch_size=config.eval.batch_size, device=device)
    ks = capped_ks(DEFAULT_KS, len(test.labels) - 1)
    return class_retrieval(features, test.labels, ks=ks).as_flat_dict()


def _no_labels_note(config: TrainConfig) -> str:
    """Why kNN and linear-probe accuracy were skipped for this run's data (its kind's own reason)."""
    return "kNN and linear-probe accuracy skipped: " + data_kind(config.data).no_labels(config.data)


def _class_rows(model: DualEncoder, config: TrainConfig, device: torch.device) -> list[ClassRow]:
    """kNN and probe rows of f(x), of the backbone features h (when the encoder has them) and of raw pixels."""
    train, test = labelled_inputs(config.data, "train"), labelled_inputs(config.data, "test")
    if train is None or test is None:
        return []
    batch = config.eval.batch_size
    encoders: dict[str, Callable[[Any], torch.Tensor]] = {"embedding": model.encode_anchors}
    representation = getattr(getattr(model.anchor_encoder, "backbone", None), "representation", None)
    if representation is not None:
        encoders["backbone"] = representation
    features = {
        name: (
            embed(encode, train.inputs, batch_size=batch, device=device),
            embed(encode, test.inputs, batch_size=batch, device=device),
        )
        for name, encode in encoders.items()
    }
    features[PIXELS] = centred_pixels(train.inputs, test.inputs)
    return class_report(
        features,
        train.labels,
        test.labels,
        n_classes=train.n_classes,
        knn_k=config.eval.knn_k,
        knn_temperature=config.eval.knn_temperature,
        probe=config.eval.linear_probe,
        probe_max_iter=config.eval.probe_max_iter,
    )


Tower = Literal["anchor", "positive"]
"""Which encoder embeds: f (anchors, x) or g (positives, y); the same network when towers = 'shared'."""


def embed_array(
    checkpoint: str | Path,
    inputs: torch.Tensor,
    *,
    tower: Tower = "anchor",
    device: str = "auto",
    batch_size: int | None = None,
) -> torch.Tensor:
    """phi(input) for N inputs with a trained checkpoint's tower, (N, d) float32 on the CPU.

    Args:
        checkpoint: a step-*.safetensors file or a run folder (its newest checkpoint).
        inputs: (N, *input_shape) inputs of the tower (cast to float32).
        tower: 'anchor' (f) or 'positive' (g).
        device: 'cpu', 'cuda' or 'auto'.
        batch_size: inputs per forward pass (default: the run's ``eval.batch_size``).

    Raises:
        ValueError: if the tower is unknown or one input's shape is not the tower's input shape.
    """
    if tower not in ("anchor", "positive"):
        raise ValueError(f"tower = {tower!r} is not known; use 'anchor' (f, for x) or 'positive' (g, for y)")
    chosen = torch_device(device)
    state = load_train_state(resolve_checkpoint(checkpoint))
    expected = state.anchor_shape if tower == "anchor" else state.positive_shape
    if tuple(inputs.shape[1:]) != expected:
        raise ValueError(
            f"the inputs have shape {tuple(inputs.shape)}, but the {tower} tower of this checkpoint takes "
            f"(N, {', '.join(str(size) for size in expected)}) inputs; pass the array it was trained on "
            f"({'x' if tower == 'anchor' else 'y'}) or choose the other --tower"
        )
    model = model_of_state(state, chosen)
    encode = model.encode_anchors if tower == "anchor" else model.encode_positives
    size = batch_size if batch_size is not None else state.config.eval.batch_size
    return embed(encode, inputs.float(), batch_size=size, device=chosen)
