"""A trained checkpoint's model, and the model its run started from: what ``crl eval`` and ``crl embed`` load.

:func:`model_of_state` rebuilds a checkpoint's :class:`~crl.models.DualEncoder` from its saved config and loads its
weights. :func:`starting_model` rebuilds the model of the same run at step 0, as the trainer built it: ``[model]``
with weights drawn from the run's "init" stream of ``run.seed`` (:class:`crl.train.build.Streams`; a MiniLM
encoder loads its pretrained weights from ``[model] path``, the packaged all-MiniLM-L6-v2 by default), then the
encoder weights of ``run.init_from`` when the run started from another checkpoint. Both are in eval mode.
"""

from __future__ import annotations

from pathlib import Path

import torch

from crl.models import DualEncoder
from crl.train.build import Streams, build_model
from crl.train.checkpoint import TrainState, load_train_state, resolve_checkpoint
from crl.train.config import TrainConfig
from crl.train.streams import derive_generator
from crl.train.warm_start import load_encoder_weights

__all__ = ["load_trained_model", "model_of_state", "starting_model", "torch_device"]


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
