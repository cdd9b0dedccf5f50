"""Starting a new run from another run's trained weights (``crl train CONFIG --init-from CHECKPOINT``).

The new run takes the checkpoint's encoder weights (both towers) and nothing else: its optimiser, schedule,
generators, data position and temperature start fresh from the new config, so it is a new run with its own
schedule (which is how a finished run is "extended"). The new run's ``[run] init_from`` records the checkpoint.
"""

from __future__ import annotations

from torch import Tensor

from crl.models import DualEncoder
from crl.train.checkpoint import TrainState

__all__ = ["load_encoder_weights", "weight_mismatches"]

_TEMPERATURE = "temperature."
"""The prefix of the temperature's entries in a model's state_dict (not taken from the checkpoint)."""


def _encoders(weights: dict[str, Tensor]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(value.shape) for name, value in weights.items() if not name.startswith(_TEMPERATURE)}


def weight_mismatches(expected: dict[str, Tensor], given: dict[str, Tensor], *, limit: int = 3) -> list[str]:
    """Up to ``limit`` lines on how the encoder weights ``given`` fail to fit a model whose state is ``expected``."""
    want, have = _encoders(expected), _encoders(given)
    lines = [
        f"{name}: {have[name]} in the checkpoint, {want[name]} here"
        for name in want
        if name in have and have[name] != want[name]
    ]
    lines += [f"{name}: missing from the checkpoint" for name in want if name not in have]
    lines += [f"{name}: in the checkpoint, not in this model" for name in have if name not in want]
    return lines[:limit]


def load_encoder_weights(model: DualEncoder, state: TrainState, *, checkpoint: str) -> None:
    """Copy the encoder weights of ``state`` into ``model`` (the temperature stays the model's own).

    Raises:
        ValueError: if the architectures differ, naming the first mismatching weights, both runs' ``[model]``
            and input shapes, and the fix.
    """
    own = model.state_dict()
    mismatches = weight_mismatches(own, state.model)
    if mismatches:
        saved = state.config.model
        raise ValueError(
            f"--init-from {checkpoint!r}: its model does not fit this config's ({'; '.join(mismatches)}). "
            f"The checkpoint has [model] encoder = {saved.encoder!r}, towers = {saved.towers!r}, "
            f"embedding_dim = {saved.embedding_dim} on inputs x {state.anchor_shape}, y {state.positive_shape}; "
            "use the same [model] and data of the same shapes, or train without --init-from"
        )
    weights = {name: value for name, value in state.model.items() if not name.startswith(_TEMPERATURE)}
    model.load_state_dict({**own, **weights})
