"""Checkpoints: tensors in safetensors, everything else in JSON, written atomically; never pickle.

A checkpoint of step t is two files in ``run_dir/checkpoints/``:

- ``step-<t>.safetensors``: every tensor, under named keys: ``model.<param>``, ``optim.<param>.<state>``
  (AdamW's exp_avg, exp_avg_sq, step), ``rng.<stream>.rank<r>`` (torch.Generator states as uint8),
  ``sampler.<key>`` (a queue's memory), ``data.permutation`` (the epoch's order);
- ``step-<t>.json``: the scalars: step, data position, optimiser hyper-parameters (per parameter group, with
  parameter names instead of indices), the LR scheduler's state, the config.

Each file is written to a temporary name in the same folder, flushed and fsync'ed, then moved into place with
``os.replace`` (atomic on POSIX); the folder is fsync'ed after. The JSON file is written last, so a checkpoint is
complete exactly when its JSON exists: a run killed mid-write leaves at most an ignored temporary or a lone
safetensors file. Only the newest ``keep`` complete checkpoints are kept.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes
from torch import Tensor, nn

__all__ = [
    "Checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "load_optimizer_state",
    "newest_checkpoint",
    "optimizer_state_tensors",
    "save_checkpoint",
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


def optimizer_state_tensors(
    optimizer: torch.optim.Optimizer, model: nn.Module
) -> tuple[dict[str, Tensor], list[dict[str, Any]]]:
    """Split an optimiser's state into named tensors and JSON-able parameter groups.

    Returns:
        ``({"optim.<param name>.<state key>": tensor}, groups)`` where each group holds its hyper-parameters and
        ``"params"`` as parameter names. Non-tensor per-parameter state is not supported (AdamW has none).
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
    return tensors, groups


def load_optimizer_state(
    optimizer: torch.optim.Optimizer,
    model: nn.Module,
    tensors: dict[str, Tensor],
    groups: list[dict[str, Any]],
) -> None:
    """Restore what :func:`optimizer_state_tensors` saved into ``optimizer`` (same model and grouping)."""
    names = _parameter_names(optimizer, model)
    index_of = {name: index for index, name in enumerate(names)}
    state: dict[int, dict[str, Tensor]] = {}
    for key, value in tensors.items():
        if not key.startswith("optim."):
            continue
        name, entry = key.removeprefix("optim.").rsplit(".", 1)
        if name not in index_of:
            raise ValueError(f"checkpoint has optimizer state for unknown parameter {name!r}")
        state.setdefault(index_of[name], {})[entry] = value
    param_groups = []
    for group in groups:
        restored = {key: (tuple(value) if isinstance(value, list) else value) for key, value in group.items()}
        restored["params"] = [index_of[name] for name in group["params"]]
        param_groups.append(restored)
    optimizer.load_state_dict({"state": state, "param_groups": param_groups})
