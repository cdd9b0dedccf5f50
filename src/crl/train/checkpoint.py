"""Checkpoints: tensors in safetensors, everything else in JSON, written atomically; never pickle.

A checkpoint of step t is two files in ``run_dir/checkpoints/``:

- ``step-<t>.safetensors``: every tensor, under named keys: ``model.<param>``, ``optim.<param>.<state>``
  (AdamW's exp_avg, exp_avg_sq, step), ``rng.<stream>.rank<r>`` (torch.Generator states as uint8),
  ``sampler.<key>`` (a queue's memory), ``data.permutation`` (the epoch's order);
- ``step-<t>.json``: the scalars: step, data position, optimiser hyper-parameters (per parameter group, with
  parameter names instead of indices), the LR scheduler's state, the config, the number of processes and the
  input shapes.

:class:`TrainState` is that layout as one record: :meth:`TrainState.to_tensors` gives the two files' contents and
:meth:`TrainState.from_tensors` reads them back (a config saved in the flat layout of earlier versions is
migrated, see :mod:`crl.train.config_migration`).

Each file is written to a temporary name in the same folder, flushed and fsync'ed, then moved into place with
``os.replace`` (atomic on POSIX); the folder is fsync'ed after. The JSON file is written last, so a checkpoint is
complete exactly when its JSON exists: a run killed mid-write leaves at most an ignored temporary or a lone
safetensors file. Only the newest ``keep`` complete checkpoints are kept.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes
from torch import Tensor, nn

from crl.train.config import TrainConfig, parse_config
from crl.train.cursor import CursorState

__all__ = [
    "Checkpoint",
    "OptimizerState",
    "StreamStates",
    "TrainState",
    "list_checkpoints",
    "load_checkpoint",
    "load_optimizer_state",
    "load_train_state",
    "newest_checkpoint",
    "optimizer_state",
    "resolve_checkpoint",
    "save_checkpoint",
    "save_train_state",
]

_NAME = re.compile(r"^step-(\d{8,})\.json$")


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: its step, tensors (by key) and JSON state."""

    path: Path
    step: int
    tensors: dict[str, Tensor]
    state: dict[str, Any]


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, payload: bytes) -> None:
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(temporary, "wb") as handle:
        handle.write(payload)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _stem(step: int) -> str:
    return f"step-{step:08d}"


def save_checkpoint(
    directory: str | Path, step: int, tensors: dict[str, Tensor], state: dict[str, Any], *, keep: int
) -> Path:
    """Write the checkpoint of ``step`` atomically and delete all but the newest ``keep`` ones.

    Args:
        directory: the checkpoints folder (created if missing).
        step: the optimiser step the state belongs to.
        tensors: named tensors (moved to CPU and made contiguous here).
        state: JSON-serialisable scalars; ``step`` is added.
        keep: number of newest complete checkpoints to keep (>= 1).

    Returns:
        The path of the safetensors file.
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1 (checkpoints to keep), got {keep!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    stem = _stem(step)
    cpu = {key: value.detach().to("cpu").contiguous() for key, value in tensors.items()}
    tensor_path = directory / f"{stem}.safetensors"
    _write_atomically(tensor_path, save_safetensors_bytes(cpu, metadata={"step": str(step)}))
    document = json.dumps({**state, "step": step}, indent=1, sort_keys=True).encode("utf-8")
    _write_atomically(directory / f"{stem}.json", document)
    _fsync_directory(directory)
    _prune(directory, keep)
    return tensor_path


def list_checkpoints(directory: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints in ``directory`` as (step, safetensors path), oldest first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for entry in directory.iterdir():
        match = _NAME.match(entry.name)
        tensor_path = entry.with_suffix(".safetensors")
        if match and tensor_path.is_file():
            found.append((int(match.group(1)), tensor_path))
    return sorted(found)


def newest_checkpoint(directory: str | Path) -> Path | None:
    """The safetensors path of the newest complete checkpoint, or ``None``."""
    found = list_checkpoints(directory)
    return found[-1][1] if found else None


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


def _prune(directory: Path, keep: int) -> None:
    for _, tensor_path in list_checkpoints(directory)[:-keep]:
        tensor_path.with_suffix(".json").unlink()
        tensor_path.unlink()


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint (give its .safetensors or .json path).

    Raises:
        FileNotFoundError: if either file of the checkpoint is missing.
    """
    path = Path(path)
    tensor_path = path.with_suffix(".safetensors")
    json_path = path.with_suffix(".json")
    for required in (tensor_path, json_path):
        if not required.is_file():
            raise FileNotFoundError(
                f"checkpoint file {str(required)!r} is missing; pass a step-*.safetensors file of a run folder"
            )
    tensors = load_safetensors_bytes(tensor_path.read_bytes())
    state = json.loads(json_path.read_text(encoding="utf-8"))
    return Checkpoint(path=tensor_path, step=int(state["step"]), tensors=tensors, state=state)


def _parameter_names(optimizer: torch.optim.Optimizer, model: nn.Module) -> list[str]:
    """Names of the optimiser's parameters in its own order (the order of state_dict's integer keys)."""
    by_id = {id(parameter): name for name, parameter in model.named_parameters()}
    return [by_id[id(parameter)] for group in optimizer.param_groups for parameter in group["params"]]


@dataclass(frozen=True)
class OptimizerState:
    """An optimiser's state by parameter name: tensors ``optim.<param name>.<state key>`` (AdamW's exp_avg,
    exp_avg_sq, step) and JSON-able parameter groups (hyper-parameters, ``"params"`` as parameter names)."""

    tensors: dict[str, Tensor]
    groups: list[dict[str, Any]]


def optimizer_state(optimizer: torch.optim.Optimizer, model: nn.Module) -> OptimizerState:
    """Split an optimiser's state into named tensors and JSON-able parameter groups.

    Non-tensor per-parameter state is not supported (AdamW has none).
    """
    names = _parameter_names(optimizer, model)
    full = optimizer.state_dict()
    tensors: dict[str, Tensor] = {}
    for index, entries in full["state"].items():
        for key, value in entries.items():
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"optimizer state {names[index]}.{key} is a {type(value).__name__}, not a tensor"
                )
            tensors[f"optim.{names[index]}.{key}"] = value
    groups = []
    for group in full["param_groups"]:
        entry = {key: (list(value) if isinstance(value, tuple) else value) for key, value in group.items()}
        entry["params"] = [names[index] for index in group["params"]]
        groups.append(entry)
    return OptimizerState(tensors, groups)


def load_optimizer_state(optimizer: torch.optim.Optimizer, model: nn.Module, saved: OptimizerState) -> None:
    """Restore what :func:`optimizer_state` saved into ``optimizer`` (same model and grouping)."""
    names = _parameter_names(optimizer, model)
    index_of = {name: index for index, name in enumerate(names)}
    state: dict[int, dict[str, Tensor]] = {}
    for key, value in saved.tensors.items():
        if not key.startswith("optim."):
            continue
        name, entry = key.removeprefix("optim.").rsplit(".", 1)
        if name not in index_of:
            raise ValueError(f"checkpoint has optimizer state for unknown parameter {name!r}")
        state.setdefault(index_of[name], {})[entry] = value
    param_groups = []
    for group in saved.groups:
        restored = {key: (tuple(value) if isinstance(value, list) else value) for key, value in group.items()}
        restored["params"] = [index_of[name] for name in group["params"]]
        param_groups.append(restored)
    optimizer.load_state_dict({"state": state, "param_groups": param_groups})


@dataclass(frozen=True)
class StreamStates:
    """The states (uint8 tensors of ``torch.Generator.get_state``) of the streams one rank draws from while it
    trains: data order, views, negatives (the "init" stream is spent when the model is built)."""

    order: Tensor
    views: Tensor
    negatives: Tensor


def _with_prefix(prefix: str, tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    return {f"{prefix}{key}": value for key, value in tensors.items()}


def _strip(prefix: str, tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    return {key.removeprefix(prefix): value for key, value in tensors.items() if key.startswith(prefix)}


@dataclass(frozen=True)
class TrainState:
    """Everything a run needs to continue bitwise from optimiser step ``step``.

    Attributes:
        step: optimiser steps taken.
        model: the model's ``state_dict`` (encoders and temperature).
        optimizer: AdamW's moments and hyper-parameters.
        schedule: the LR scheduler's ``state_dict`` (JSON-able).
        streams: the generator states of each rank, in rank order (K = len(streams) processes).
        sampler: the negative sampler's tensors (a queue's memory; empty for the others).
        cursor: the data permutation and position.
        config: the run's config.
        anchor_shape, positive_shape: the shapes of one input x and y (to rebuild the model).
    """

    step: int
    model: dict[str, Tensor]
    optimizer: OptimizerState
    schedule: dict[str, Any]
    streams: tuple[StreamStates, ...]
    sampler: dict[str, Tensor]
    cursor: CursorState
    config: TrainConfig
    anchor_shape: tuple[int, ...]
    positive_shape: tuple[int, ...]

    @property
    def world_size(self) -> int:
        """K, the number of processes that trained the run."""
        return len(self.streams)

    def to_tensors(self) -> tuple[dict[str, Tensor], dict[str, Any]]:
        """(the safetensors content by key, the JSON document); see the module docstring for the keys."""
        tensors = {**_with_prefix("model.", self.model), **self.optimizer.tensors}
        for rank, states in enumerate(self.streams):
            for field in fields(states):
                tensors[f"rng.{field.name}.rank{rank}"] = getattr(states, field.name)
        tensors.update(_with_prefix("sampler.", self.sampler))
        tensors["data.permutation"] = self.cursor.permutation
        document = {
            "step": self.step,
            "data": {"position": self.cursor.position, "epoch": self.cursor.epoch},
            "optimizer": self.optimizer.groups,
            "schedule": self.schedule,
            "config": self.config.model_dump(),
            "world_size": self.world_size,
            "anchor_shape": list(self.anchor_shape),
            "positive_shape": list(self.positive_shape),
        }
        return tensors, document

    @classmethod
    def from_tensors(
        cls, tensors: dict[str, Tensor], document: dict[str, Any], *, source: str = "checkpoint"
    ) -> TrainState:
        """Read back what :meth:`to_tensors` wrote (``source`` names the file in config errors)."""
        streams = tuple(
            StreamStates(
                **{field.name: tensors[f"rng.{field.name}.rank{rank}"] for field in fields(StreamStates)}
            )
            for rank in range(int(document["world_size"]))
        )
        data = document["data"]
        return cls(
            step=int(document["step"]),
            model=_strip("model.", tensors),
            optimizer=OptimizerState(
                {key: value for key, value in tensors.items() if key.startswith("optim.")},
                document["optimizer"],
            ),
            schedule=document["schedule"],
            streams=streams,
            sampler=_strip("sampler.", tensors),
            cursor=CursorState(tensors["data.permutation"], int(data["position"]), int(data["epoch"])),
            config=parse_config(document["config"], source=f"{source} (saved config)"),
            anchor_shape=tuple(document["anchor_shape"]),
            positive_shape=tuple(document["positive_shape"]),
        )


def save_train_state(directory: str | Path, state: TrainState, *, keep: int) -> Path:
    """Write ``state`` as the checkpoint of its step (atomically; see :func:`save_checkpoint`)."""
    tensors, document = state.to_tensors()
    return save_checkpoint(directory, state.step, tensors, document, keep=keep)


def load_train_state(path: str | Path) -> TrainState:
    """The :class:`TrainState` of a checkpoint (its .safetensors or .json path)."""
    checkpoint = load_checkpoint(path)
    return TrainState.from_tensors(checkpoint.tensors, checkpoint.state, source=str(checkpoint.path))
