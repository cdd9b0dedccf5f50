"""Which vectors a trained model is used with: its backbone features h, or its embedding z.

SimCLR's encoder is a backbone giving h and a projection head giving z = g(h), the vectors the contrastive loss
sees; h often classifies and searches better than z. A run on images therefore measures both on its validation
images (:func:`crl.train.data.validation_set`): each validation image (the anchor tower's view) queries the
training images by cosine, those of its class relevant, and the class accuracy@1 of a feature set is

    acc@1 = (1/V) sum_v 1[class of argmax_{t in T} cos(phi(v), phi(t)) = class of v]

over the V validation images (ties pessimistic, :mod:`crl.metrics.ir`). The larger of acc@1(h) and acc@1(z)
wins, z on a tie. h is offered only by a shared tower (``[model] towers = "shared"``) with backbone features:
two towers' backbones give h of x and h of y in two spaces that only their heads align, so they use z.

The trainer measures the choice at the end of a run; a checkpoint without a recorded choice (a run made before
this, or an earlier step) gets it measured at its first use. It is kept by step in the run folder's
``vectors.json`` (:data:`VECTORS_FILE`) with both scores and the validation set's size, seed and whether it was
held out of the training pairs. ``crl embed``, ``crl index build`` and ``crl eval`` use the recorded vectors unless
``--vectors`` says otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from crl._lock import write_atomically
from crl.data.source import Batch
from crl.metrics.ir import gallery_class_retrieval
from crl.models import DualEncoder, embed
from crl.train.config import TrainConfig
from crl.train.data import ValidationSet, validation_set

__all__ = [
    "VECTORS",
    "VECTORS_FILE",
    "Tower",
    "VectorChoice",
    "Vectors",
    "backbone_features",
    "check_vectors",
    "choose_vectors",
    "encoder_of",
    "read_choice",
    "record_choice",
    "without_h",
]

Vectors = Literal["h", "z"]
"""h: the backbone features before the projection head; z: the embedding, the head's output."""

VECTORS: tuple[Vectors, ...] = ("h", "z")

VECTORS_FILE = "vectors.json"
"""The run folder's record of the chosen vectors, by step."""

Tower = Literal["anchor", "positive"]
"""Which encoder embeds: f (anchors, x) or g (positives, y); the same network when towers = 'shared'."""


def check_vectors(text: str) -> Vectors:
    """``--vectors``: 'h' or 'z'.

    Raises:
        ValueError: for any other value, naming the two and the default.
    """
    if text == "h":
        return "h"
    if text == "z":
        return "z"
    raise ValueError(
        f"--vectors {text!r} is not known; use h (the backbone features) or z (the embedding), or leave it out "
        "for the run's recorded choice"
    )


def backbone_features(encoder: nn.Module) -> Callable[[Batch], Tensor] | None:
    """h of an encoder: its backbone's ``representation`` (the features before the projection head), or ``None``
    when it has none (e.g. a MiniLM or bag-of-tokens encoder)."""
    found: Callable[[Batch], Tensor] | None = getattr(
        getattr(encoder, "backbone", None), "representation", None
    )
    return found


def without_h(model: DualEncoder) -> str | None:
    """Why ``model`` has no usable h, or ``None`` when it has one: its encoder has no backbone features, or it has
    two towers, whose backbones' features live in two spaces that only the heads align."""
    if model.positive_encoder is not None:
        return (
            "this run has two towers, whose backbone features h are not comparable (only their heads map x and y "
            "into one space)"
        )
    if backbone_features(model.anchor_encoder) is None:
        backbone = type(getattr(model.anchor_encoder, "backbone", model.anchor_encoder)).__name__
        return f"this run's encoder ({backbone}) has no backbone features h before a projection head"
    return None


def encoder_of(model: DualEncoder, vectors: Vectors, tower: Tower = "anchor") -> Callable[[Batch], Tensor]:
    """The function giving ``vectors`` of ``tower``'s inputs: z = f(x) or g(y), or h of the shared backbone.

    Raises:
        ValueError: for h of a model without usable h (:func:`without_h`), naming the fix.
    """
    if vectors == "z":
        return model.encode_anchors if tower == "anchor" else model.encode_positives
    features = backbone_features(model.anchor_encoder)
    if model.positive_encoder is not None or features is None:
        raise ValueError(f"--vectors h: {without_h(model)}; use --vectors z")
    return features


@dataclass(frozen=True)
class VectorChoice:
    """The vectors chosen for one checkpoint, and why.

    Attributes:
        vectors: the winner, "h" or "z".
        step: the checkpoint's step.
        scores: class accuracy@1 on the validation images, {"h": ..., "z": ...}.
        n_queries: V, the validation images.
        n_gallery: the training images they searched.
        held_out: whether the validation images were left out of the training pairs (``[data] validation`` > 0).
        seed: ``[data] validation_seed``, which drew them.
    """

    vectors: Vectors
    step: int
    scores: dict[str, float]
    n_queries: int
    n_gallery: int
    held_out: bool
    seed: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON record of ``vectors.json``."""
        return {
            "vectors": self.vectors,
            "metric": "class accuracy@1, validation images searching the training images by cosine",
            "scores": self.scores,
            "validation": {"images": self.n_queries, "held_out": self.held_out, "seed": self.seed},
            "gallery": self.n_gallery,
        }

    @classmethod
    def from_dict(cls, step: int, document: dict[str, Any]) -> VectorChoice:
        """Read back :meth:`to_dict` (the record of ``step``)."""
        validation = document["validation"]
        return cls(
            check_vectors(document["vectors"]),
            step,
            {name: float(value) for name, value in document["scores"].items()},
            int(validation["images"]),
            int(document["gallery"]),
            bool(validation["held_out"]),
            int(validation["seed"]),
        )

    def describe(self) -> str:
        """``h (validation class accuracy@1: h 0.8512, z 0.8011; 5000 held-out images searching 55000)``."""
        scores = ", ".join(f"{name} {value:.4f}" for name, value in self.scores.items())
        kind = "held-out" if self.held_out else "trained-on (data.validation = 0)"
        return (
            f"{self.vectors} (validation class accuracy@1: {scores}; {self.n_queries} {kind} images searching "
            f"{self.n_gallery})"
        )


def _accuracy_at_1(
    encode: Callable[[Batch], Tensor], validation: ValidationSet, batch: int, device: torch.device
) -> float:
    """acc@1 of the validation images searching the training images by cosine, embedded by ``encode``."""
    queries, gallery = (
        embed(encode, inputs.inputs, batch_size=batch, device=device)
        for inputs in (validation.queries, validation.gallery)
    )
    report = gallery_class_retrieval(
        queries, validation.queries.labels, gallery, validation.gallery.labels, ks={"accuracy": (1,)}
    )
    return report.values["accuracy"][1]


def choose_vectors(
    model: DualEncoder, config: TrainConfig, device: torch.device, step: int
) -> VectorChoice | None:
    """The vectors of the higher validation class accuracy@1 (z on a tie), measured with ``model`` in eval mode
    (its mode restored); ``None`` when the model has no usable h (:func:`without_h`) or the run no validation
    images (data other than images)."""
    if without_h(model) is not None:
        return None
    validation = validation_set(config.data)
    if validation is None:
        return None
    training = model.training
    model.eval()
    try:
        scores: dict[str, float] = {
            vectors: _accuracy_at_1(encoder_of(model, vectors), validation, config.eval.batch_size, device)
            for vectors in VECTORS
        }
    finally:
        model.train(training)
    winner: Vectors = "h" if scores["h"] > scores["z"] else "z"
    return VectorChoice(
        winner,
        step,
        scores,
        len(validation.queries.labels),
        len(validation.gallery.labels),
        validation.held_out,
        validation.seed,
    )


def _read(run_dir: Path) -> dict[str, Any]:
    """The document of ``run_dir/vectors.json`` (empty when there is none).

    Raises:
        ValueError: if the file is not the JSON object this module writes (naming it and the fix).
    """
    path = run_dir / VECTORS_FILE
    if not path.is_file():
        return {"by_step": {}}
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{path} is not valid JSON ({error}); delete it to measure the choice again"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("by_step"), dict):
        raise ValueError(f'{path} holds no "by_step" object; delete it to measure the choice again')
    return document


def read_choice(run_dir: Path, step: int) -> VectorChoice | None:
    """The choice recorded for ``step`` in ``run_dir/vectors.json``, or ``None``.

    Raises:
        ValueError: if the file or its record of ``step`` is malformed (naming the file and the fix).
    """
    record = _read(run_dir)["by_step"].get(str(step))
    if record is None:
        return None
    try:
        return VectorChoice.from_dict(step, record)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(
            f"{run_dir / VECTORS_FILE}: the record of step {step} is malformed ({error}); delete it to measure "
            "the choice again"
        ) from None


def record_choice(run_dir: Path, choice: VectorChoice) -> None:
    """Write ``choice`` under its step into ``run_dir/vectors.json`` (atomically), keeping the other steps'."""
    document = _read(run_dir)
    document["by_step"][str(choice.step)] = choice.to_dict()
    write_atomically(run_dir / VECTORS_FILE, (json.dumps(document, indent=1) + "\n").encode("utf-8"))
