"""Held-out evaluation of a trained checkpoint: the logic behind ``crl eval CHECKPOINT``.

Vectors: the checkpoint is evaluated with the vectors it is used with (:func:`crl.serving.trained.used_vectors`:
``--vectors``, else the run's choice of backbone h or embedding z on its validation images). z is scored by the
model's score s = <f(x), g(y)>; h, which has no trained score, by cosine (rows normalised).

Retrieval ([A]'s criterion E(s) and the usual ranking metrics): every held-out anchor x_i queries the gallery of
all held-out positives y_j; its positive is y_i (index-matched). Fashion-MNIST: the 10,000 test images, as two
augmented views drawn once with a generator seeded by ``eval.seed``, or as left/right halves; your own arrays
(``source = "arrays"``): their held-out pairs. The metrics (accuracy@k, MRR, nDCG@k, MAP, AUC with standard
errors) come from :func:`crl.metrics.retrieval.retrieval_metrics`.

Class retrieval and baselines (labelled data, :mod:`crl.metrics.baselines`): each test item (its anchor view)
queries the training items T by cosine, those of its class relevant (accuracy, precision and recall@k, MRR@10,
nDCG@10, MAP@100 as sentence-transformers defines them), with the used vectors, the raw centred pixels, and the
pixels reduced by PCA (fit on T alone) to the used vectors' dimension; for each of class accuracy@1, MAP@100 and
kNN accuracy, the learned-minus-baseline difference with its paired bootstrap 95% interval over the test queries.

Class accuracy (labelled data): embeddings f(x) (:func:`crl.models.embed`) of the anchor view of every train and
test image (the clean image for two views, the left half for halves), scored by the weighted kNN monitor and the
linear probe of :mod:`crl.metrics.classification`; skipped, with a note, for data without labels. Beside them
(:mod:`crl.metrics.class_report`, 95% intervals): the same two on the backbone features h before the projection
head (SimCLR's evaluation; encoders with a ``representation`` method) and on the raw centred inputs, the baseline
that a learned representation must beat, with each row's paired difference from that baseline.

A text run (``[data] source = "wordnet" | "bible" | "text_pairs"``) is evaluated by retrieval with qrels, on
its test split or on your own queries, corpus and qrels, beside the model it started from
(:mod:`crl.serving.text_evaluate`); the models are rebuilt by :mod:`crl.serving.trained`.

:func:`embed_array` embeds any array with a checkpoint's anchor or positive tower (``crl embed``), as h or z.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from crl.data.source import Batch
from crl.data.text import RetrievalTask
from crl.metrics.baselines import (
    BaselineComparison,
    FeatureScores,
    compare_with_baselines,
    feature_scores,
    pca_dimension,
    pca_pixels,
)
from crl.metrics.class_report import PIXELS, ClassRow, centred_pixels, class_report
from crl.metrics.classification import NORM_FLOOR
from crl.metrics.ir import DEFAULT_KS, DEFINITIONS
from crl.metrics.retrieval import RetrievalReport, retrieval_metrics
from crl.models import DualEncoder, embed
from crl.serving.text_evaluate import TextEvalResult, evaluate_text_state
from crl.serving.trained import UsedVectors, load_trained_model, model_of_state, torch_device, used_vectors
from crl.train.checkpoint import load_train_state, resolve_checkpoint
from crl.train.config import TextData, TrainConfig
from crl.train.data import LabelledInputs, data_kind, heldout_pairs, labelled_inputs
from crl.train.vectors import Tower, Vectors, backbone_features, encoder_of

_log = logging.getLogger(__name__)

__all__ = [
    "EmbeddedArray",
    "EvalResult",
    "Tower",
    "embed_array",
    "evaluate_checkpoint",
    "load_trained_model",
    "resolve_checkpoint",
]

FEATURES: dict[Vectors, str] = {"z": "embedding", "h": "backbone"}
"""The name of each kind of vectors among the class report's feature sets."""

PCA = "pca"
"""The name of the PCA baseline."""


@dataclass(frozen=True)
class EvalResult:
    """Held-out figures of one checkpoint.

    Attributes:
        checkpoint: the safetensors file evaluated.
        step: its training step.
        retrieval: held-out two-view (or halves, or synthetic) retrieval metrics of the used vectors.
        knn_accuracy: weighted kNN class accuracy of the used vectors on the test split, or ``None`` without
            labels.
        probe_accuracy: their linear-probe accuracy, or ``None`` (no labels, or the probe is off).
        notes: why a figure was skipped, one line each (e.g. data without labels).
        classes: kNN and probe rows of the embedding, the backbone features and the raw-pixel baseline, with
            intervals and differences from the baseline (empty without labels).
        class_retrieval: IR metrics of the used vectors' class retrieval, test queries against the training
            items (``ndcg@10``, ...), or ``None``.
        vectors: the vectors used and why.
        baselines: the used vectors beside the pixels and their PCA, or ``None`` without labels.
        raw_inputs: what the raw baseline (``"pixels"`` in the JSON and the rows) is, in words: "pixels" for
            images, "raw inputs" for other arrays.
    """

    checkpoint: Path
    step: int
    retrieval: RetrievalReport
    knn_accuracy: float | None
    probe_accuracy: float | None
    notes: tuple[str, ...] = ()
    classes: tuple[ClassRow, ...] = ()
    class_retrieval: dict[str, float] | None = None
    vectors: UsedVectors | None = None
    baselines: BaselineComparison | None = None
    raw_inputs: str = "pixels"

    def as_dict(self) -> dict[str, Any]:
        """A flat JSON-able dict (the content of eval.json), with the baselines as one block."""
        out: dict[str, Any] = {
            "checkpoint": str(self.checkpoint),
            "step": self.step,
            "n_queries": self.retrieval.n_queries,
            "gallery_size": self.retrieval.gallery_size,
        }
        if self.vectors is not None:
            out.update(self.vectors.as_dict())
        out.update(self.retrieval.as_flat_dict())
        out.update({f"class_{name}": value for name, value in (self.class_retrieval or {}).items()})
        if self.class_retrieval:
            out["class_definitions"] = f"{DEFINITIONS[False]['ndcg']}: relevant = of the query's class"
        out["knn_accuracy"] = self.knn_accuracy
        out["probe_accuracy"] = self.probe_accuracy
        for row in self.classes:
            out.update(_class_row_dict(row))
        if self.baselines is not None:
            out["baselines"] = self.baselines.as_dict()
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
    vectors: str | None = None,
) -> EvalResult | TextEvalResult:
    """Evaluate a checkpoint (or a run folder's newest) on the held-out split of its config's data with
    ``vectors`` ('h' or 'z'; ``None``: the run's choice); a text run by retrieval beside its starting model
    (:mod:`crl.serving.text_evaluate`), on its test split or on ``task`` (your own queries, corpus and qrels,
    named ``task_name``).

    Uses the run's ``run.num_threads`` torch threads when it sets them.

    Raises:
        ValueError: if ``task`` or ``text_only`` (the options given that only a text run takes, e.g.
            ``["--trec-run"]``) is given for a run that is not a text run, or ``vectors`` for a text run, before
            anything is computed.
    """
    chosen = torch_device(device)
    checkpoint_path = resolve_checkpoint(path)
    state = load_train_state(checkpoint_path)
    config = state.config
    if config.run.num_threads > 0:
        torch.set_num_threads(config.run.num_threads)
    if isinstance(config.data, TextData):
        if vectors is not None:
            raise ValueError(
                f"--vectors {vectors}: a text run is evaluated with its text model's embeddings; drop --vectors"
            )
        return evaluate_text_state(state, checkpoint_path, chosen, task=task, task_name=task_name)
    if task is not None or text_only:
        given = ", ".join(text_only) or "a task of your own"
        raise ValueError(
            f"{given}: only a text run takes these; this run's [data] source = {config.data.source!r} is "
            "evaluated on its held-out pairs, so drop them"
        )
    model = model_of_state(state, chosen)
    used = used_vectors(state, checkpoint_path, vectors, model, chosen)
    retrieval = _pair_retrieval(model, used.vectors, config, chosen)
    labelled = _labelled(config)
    if labelled is None:
        skipped = (_no_labels_note(config),)
        return EvalResult(checkpoint_path, state.step, retrieval, None, None, skipped, vectors=used)
    train, test = labelled
    raw = raw_inputs_name(train.inputs)
    _log.info("features of %s training and %s test items", f"{len(train.labels):,}", f"{len(test.labels):,}")
    features = _features(model, train, test, config, chosen)
    _log.info(
        "kNN and linear-probe accuracy of %s", ", ".join(raw if name == PIXELS else name for name in features)
    )
    rows = class_report(
        features,
        train.labels,
        test.labels,
        n_classes=train.n_classes,
        knn_k=config.eval.knn_k,
        knn_temperature=config.eval.knn_temperature,
        probe=config.eval.linear_probe,
        probe_max_iter=config.eval.probe_max_iter,
    )
    name = FEATURES[used.vectors]
    knn, probe = _accuracy(rows, name, "knn"), _accuracy(rows, name, "probe")
    baselines, notes = _baselines(used.vectors, features, rows, train, test, config, raw)
    return EvalResult(
        checkpoint_path,
        state.step,
        retrieval,
        knn,
        probe,
        notes,
        tuple(rows),
        class_retrieval=None if baselines is None else baselines.learned.retrieval.as_flat_dict(),
        vectors=used,
        baselines=baselines,
        raw_inputs=raw,
    )


def raw_inputs_name(inputs: Tensor) -> str:
    """The raw baseline in words: "pixels" for images (inputs (N, H, W) or (N, C, H, W)), else "raw inputs"."""
    return "pixels" if inputs.dim() >= 3 else "raw inputs"


def _cosine(encode: Callable[[Batch], Tensor]) -> Callable[[Batch], Tensor]:
    """``encode`` with each output row divided by max(||row||_2, 1e-12), so inner products are cosines."""

    def unit(batch: Batch) -> Tensor:
        rows = encode(batch)
        return rows / rows.norm(dim=-1, keepdim=True).clamp_min(NORM_FLOOR)

    return unit


def _pair_retrieval(
    model: DualEncoder, vectors: Vectors, config: TrainConfig, device: torch.device
) -> RetrievalReport:
    """Held-out pair retrieval with ``vectors``: z by the model's score <f(x), g(y)>, h by cosine."""
    anchors, positives = encoder_of(model, vectors, "anchor"), encoder_of(model, vectors, "positive")
    if vectors == "h":
        anchors, positives = _cosine(anchors), _cosine(positives)
    batch = config.eval.batch_size
    pairs = heldout_pairs(config)
    queries = embed(anchors, pairs.x, batch_size=batch, device=device)
    gallery = embed(positives, pairs.y, batch_size=batch, device=device)
    return retrieval_metrics(
        queries, gallery, positive_index=torch.arange(queries.shape[0]), ks=config.eval.ks
    )


def _labelled(config: TrainConfig) -> tuple[LabelledInputs, LabelledInputs] | None:
    """(training items, test items) with labels, or ``None`` without labels."""
    train, test = labelled_inputs(config.data, "train"), labelled_inputs(config.data, "test")
    return None if train is None or test is None else (train, test)


def _no_labels_note(config: TrainConfig) -> str:
    """Why kNN and linear-probe accuracy were skipped for this run's data (its kind's own reason)."""
    return "kNN and linear-probe accuracy skipped: " + data_kind(config.data).no_labels(config.data)


def _features(
    model: DualEncoder, train: LabelledInputs, test: LabelledInputs, config: TrainConfig, device: torch.device
) -> dict[str, tuple[Tensor, Tensor]]:
    """(train, test) features of f(x), of the backbone features h (when the encoder has them) and of the
    centred raw inputs."""
    batch = config.eval.batch_size
    encoders: dict[str, Callable[[Any], Tensor]] = {FEATURES["z"]: model.encode_anchors}
    representation = backbone_features(model.anchor_encoder)
    if representation is not None:
        encoders[FEATURES["h"]] = representation
    features = {
        name: (
            embed(encode, train.inputs, batch_size=batch, device=device),
            embed(encode, test.inputs, batch_size=batch, device=device),
        )
        for name, encode in encoders.items()
    }
    features[PIXELS] = centred_pixels(train.inputs, test.inputs)
    return features


def _accuracy(rows: list[ClassRow], features: str, method: str) -> float | None:
    """The accuracy of ``features`` by ``method``, or None when it was not computed."""
    found = [row.interval.accuracy for row in rows if row.features == features and row.method == method]
    return found[0] if found else None


def _knn_correct(rows: list[ClassRow], features: str) -> Tensor:
    """The per-item kNN outcomes of ``features`` in the class report."""
    return next(row.correct for row in rows if row.features == features and row.method == "knn")


def _baselines(
    vectors: Vectors,
    features: dict[str, tuple[Tensor, Tensor]],
    rows: list[ClassRow],
    train: LabelledInputs,
    test: LabelledInputs,
    config: TrainConfig,
    raw: str,
) -> tuple[BaselineComparison | None, tuple[str, ...]]:
    """The used vectors, the pixels (the raw inputs, called ``raw`` in the notes) and their PCA to the vectors'
    width, scored on the test queries searching the training items (class retrieval with sentence-transformers'
    cut-offs, kNN), and the notes; ``None`` with a note when no test label occurs among the training items."""
    if not bool(torch.isin(test.labels, train.labels).any()):
        return None, ("class retrieval skipped: no test item's class occurs among the training items",)
    name = FEATURES[vectors]

    def scores(
        features_name: str, pair: tuple[Tensor, Tensor], knn_correct: Tensor | None = None
    ) -> FeatureScores:
        return feature_scores(
            features_name,
            *pair,
            train.labels,
            test.labels,
            n_classes=train.n_classes,
            knn_k=config.eval.knn_k,
            knn_temperature=config.eval.knn_temperature,
            knn_correct=knn_correct,
            ks=DEFAULT_KS,
        )

    learned = scores(vectors, features[name], _knn_correct(rows, name))
    pixels = scores(PIXELS, features[PIXELS], _knn_correct(rows, PIXELS))
    width = pca_dimension(learned.dimension, pixels.dimension, len(train.labels))
    pca = scores(PCA, pca_pixels(train.inputs, test.inputs, width))
    smallest = smallest_relevant(train.labels, test.labels)
    notes: tuple[str, ...] = (
        f"class retrieval recall@k is in the JSON, not the table: every test class has >= {smallest} relevant "
        f"training items, so recall@k <= k / {smallest}",
    )
    if width == pixels.dimension:
        notes += (
            f"the PCA baseline keeps all {width} axes of the {raw} (the vectors have {learned.dimension}): a "
            f"rotation of the centred {raw}, so its cosines and figures equal the {raw}'",
        )
    return compare_with_baselines(learned, (pixels, pca)), notes


def smallest_relevant(gallery_labels: Tensor, query_labels: Tensor) -> int:
    """min over the query classes c of |{gallery items of class c}|: the fewest relevant items a query has in class
    retrieval (a query whose class is absent from the gallery is left out)."""
    counts = torch.bincount(gallery_labels.long())
    present = torch.unique(query_labels.long())
    present = present[present < counts.shape[0]]
    sizes = counts[present]
    return int(sizes[sizes > 0].min())


@dataclass(frozen=True)
class EmbeddedArray:
    """Vectors of an array and which vectors they are.

    Attributes:
        vectors: (N, d) float32 on the CPU.
        used: h or z, and why.
    """

    vectors: Tensor
    used: UsedVectors


def embed_array(
    checkpoint: str | Path,
    inputs: torch.Tensor,
    *,
    tower: Tower = "anchor",
    device: str = "auto",
    batch_size: int | None = None,
    vectors: str | None = None,
) -> EmbeddedArray:
    """The vectors of N inputs by a trained checkpoint's tower: z = f(x) or g(y), or that tower's backbone
    features h; ``vectors`` None uses the run's choice (:func:`crl.serving.trained.used_vectors`).

    Args:
        checkpoint: a step-*.safetensors file or a run folder (its newest checkpoint).
        inputs: (N, *input_shape) inputs of the tower (cast to float32).
        tower: 'anchor' (f) or 'positive' (g).
        device: 'cpu', 'cuda' or 'auto'.
        batch_size: inputs per forward pass (default: the run's ``eval.batch_size``).
        vectors: 'h', 'z' or None (the run's choice).

    Raises:
        ValueError: if the tower or the vectors are unknown, the encoder has no h, or one input's shape is not
            the tower's input shape.
    """
    if tower not in ("anchor", "positive"):
        raise ValueError(f"tower = {tower!r} is not known; use 'anchor' (f, for x) or 'positive' (g, for y)")
    chosen = torch_device(device)
    checkpoint_path = resolve_checkpoint(checkpoint)
    state = load_train_state(checkpoint_path)
    expected = state.anchor_shape if tower == "anchor" else state.positive_shape
    if tuple(inputs.shape[1:]) != expected:
        raise ValueError(
            f"the inputs have shape {tuple(inputs.shape)}, but the {tower} tower of this checkpoint takes "
            f"(N, {', '.join(str(size) for size in expected)}) inputs; pass the array it was trained on "
            f"({'x' if tower == 'anchor' else 'y'}) or choose the other --tower"
        )
    model = model_of_state(state, chosen)
    used = used_vectors(state, checkpoint_path, vectors, model, chosen)
    size = batch_size if batch_size is not None else state.config.eval.batch_size
    encode = encoder_of(model, used.vectors, tower)
    return EmbeddedArray(embed(encode, inputs.float(), batch_size=size, device=chosen), used)
