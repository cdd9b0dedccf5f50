"""A trained checkpoint's model, the model its run started from, and the vectors it is used with: what ``crl eval``,
``crl embed`` and ``crl index build`` load.

:func:`model_of_state` rebuilds a checkpoint's :class:`~crl.models.DualEncoder` from its saved config and loads its
weights. :func:`starting_model` rebuilds the model of the same run at step 0, as the trainer built it: ``[model]``
with weights drawn from the run's "init" stream of ``run.seed`` (:class:`crl.train.build.Streams`; a MiniLM
encoder loads its pretrained weights from ``[model] path``, the packaged all-MiniLM-L6-v2 by default), then the
encoder weights of ``run.init_from`` when the run started from another checkpoint. Both are in eval mode.

:func:`used_vectors` says which vectors (backbone h or embedding z, :mod:`crl.train.vectors`) a checkpoint is used
with: ``--vectors`` when given, else the choice recorded in its run folder's ``vectors.json``, else the choice
measured now on the run's validation images and recorded there, else z (data without validation images, or an
encoder without backbone features).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from crl.models import DualEncoder
from crl.train.build import Streams, build_model
from crl.train.checkpoint import TrainState, load_train_state, resolve_checkpoint
from crl.train.config import TrainConfig
from crl.train.streams import derive_generator
from crl.train.vectors import (
    VectorChoice,
    Vectors,
    check_vectors,
    choose_vectors,
    read_choice,
    record_choice,
    without_h,
)
from crl.train.warm_start import load_encoder_weights

__all__ = [
    "UsedVectors",
    "load_trained_model",
    "model_of_state",
    "run_folder",
    "starting_model",
    "torch_device",
    "used_vectors",
]


def torch_device(device: str) -> torch.device:
    """The torch device of 'auto' (CUDA when available), 'cpu' or 'cuda'.

    Raises:
        ValueError: for another name, or 'cuda' on a machine without CUDA.
    """
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device = {device!r} is not known; use 'auto', 'cpu' or 'cuda'")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "device = 'cuda' but torch finds no CUDA device on this machine; use 'cpu' or 'auto'"
        )
    return torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)


def _built(state: TrainState, generator: torch.Generator) -> DualEncoder:
    """The model of a state's config on its input shapes, weights drawn from ``generator``."""
    config = state.config
    return build_model(config.model, config.loss, state.anchor_shape, state.positive_shape, generator)


def model_of_state(state: TrainState, device: torch.device) -> DualEncoder:
    """The model of a saved state, rebuilt from its config with its weights, on ``device`` in eval mode."""
    model = _built(state, derive_generator(0, "eval-init"))
    model.load_state_dict(state.model)
    return model.to(device).eval()


def starting_model(state: TrainState, device: torch.device) -> DualEncoder:
    """The model the run of ``state`` started from (step 0), on ``device`` in eval mode.

    Raises:
        FileNotFoundError: if the run's ``init_from`` checkpoint is gone.
    """
    model = _built(state, Streams.derive(state.config.run.seed).init)
    init_from = state.config.run.init_from
    if init_from:
        load_encoder_weights(model, load_train_state(resolve_checkpoint(init_from)), checkpoint=init_from)
    return model.to(device).eval()


def load_trained_model(path: str | Path, device: torch.device) -> tuple[DualEncoder, TrainConfig, int]:
    """Rebuild the model of a checkpoint from its saved config and load its weights (eval mode).

    Returns:
        (model, config, step).
    """
    state = load_train_state(resolve_checkpoint(path))
    return model_of_state(state, device), state.config, state.step


def run_folder(checkpoint: Path) -> Path:
    """The run folder of a checkpoint file, ``RUN_DIR/checkpoints/step-*.safetensors``."""
    return checkpoint.parent.parent


@dataclass(frozen=True)
class UsedVectors:
    """The vectors a command uses, and why.

    Attributes:
        vectors: "h" (backbone features) or "z" (embedding).
        reason: "--vectors", "recorded" (``vectors.json``), "measured now" (and recorded), or why z is used
            without a choice.
        choice: the run's choice for this checkpoint when there is one (also beside ``--vectors``).
    """

    vectors: Vectors
    reason: str
    choice: VectorChoice | None = None

    def describe(self) -> str:
        """One line: ``vectors h, the run's choice (recorded): h (validation class accuracy@1: ...)``."""
        if self.reason == "--vectors":
            return f"vectors {self.vectors} (--vectors)"
        if self.choice is None:
            return f"vectors {self.vectors} ({self.reason})"
        return f"vectors {self.vectors}, the run's choice ({self.reason}): {self.choice.describe()}"

    def as_dict(self) -> dict[str, Any]:
        """``{"vectors": "h", "vectors_reason": "recorded", "vectors_choice": {...} or None}``."""
        choice = None if self.choice is None else {"step": self.choice.step, **self.choice.to_dict()}
        return {"vectors": self.vectors, "vectors_reason": self.reason, "vectors_choice": choice}


def _no_choice_reason(state: TrainState, model: DualEncoder) -> str:
    """Why a run has no choice of vectors (so z is used)."""
    reason = without_h(model)
    if reason is not None:
        return f"z: {reason}"
    return f"z: [data] source = {state.config.data.source!r} has no validation images to choose on"


def used_vectors(
    state: TrainState, checkpoint: Path, requested: str | None, model: DualEncoder, device: torch.device
) -> UsedVectors:
    """The vectors to use with the checkpoint of ``state`` (its ``model`` on ``device``): ``requested``
    (``--vectors``) when given, else the run's recorded choice for its step, else the choice measured now (and
    recorded in the run folder), else z.

    Raises:
        ValueError: for a ``requested`` other than 'h' or 'z', or a malformed ``vectors.json``.
    """
    run_dir = run_folder(checkpoint)
    if requested is not None:
        chosen = check_vectors(requested)
        return UsedVectors(chosen, "--vectors", read_choice(run_dir, state.step))
    recorded = read_choice(run_dir, state.step)
    if recorded is not None:
        return UsedVectors(recorded.vectors, "recorded", recorded)
    measured = choose_vectors(model, state.config, device, state.step)
    if measured is None:
        return UsedVectors("z", _no_choice_reason(state, model))
    record_choice(run_dir, measured)
    return UsedVectors(measured.vectors, "measured now", measured)
