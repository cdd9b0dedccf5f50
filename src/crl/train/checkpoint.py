"""Checkpoints: tensors in safetensors, everything else in JSON, written atomically; never pickle.

A checkpoint of step t is two files in ``run_dir/checkpoints/``: ``step-<t>.safetensors`` holds every tensor
under named keys (``model.<param>``, ``optim.<param>.<state>``, ``rng.<stream>.rank<r>`` generator states,
``sampler.<key>``, ``estimator.<key>``, ``data.permutation``); ``step-<t>.json`` the scalars (step, data
position, optimiser groups with parameter names, the LR schedule, the config, the process count, the input
shapes, the open log window), the sha256 of the safetensors file, and the sha256 of the JSON state itself
(``state_sha256``: of its canonical form, sorted keys and no whitespace, without that entry), so one changed
value anywhere in the checkpoint is detected. :class:`TrainState` is that layout as one record (an older
flat-layout config is migrated: :func:`crl.train.config.files.migrate_flat_sections`; an image ``[data]`` saved
before ``validation`` existed reads as ``validation = 0``: :func:`crl.train.config.parse_saved_config`).

Each file is written through a fsync'ed temporary moved into place with ``os.replace`` (:mod:`crl._lock`); the
JSON last, so a checkpoint is complete exactly when its JSON exists: a killed run leaves at most a temporary
(removed when the run starts again) or a lone safetensors file (removed with a warning when the run resumes or
prunes: :func:`remove_orphans`); a failed write removes what it wrote, and a full disk is one clear error. Only
the newest ``keep`` complete checkpoints are kept. A damaged checkpoint is an error naming the file
(:class:`CheckpointError`): both sha256 must match, and the step in the JSON must match the safetensors metadata
and the file name. A checkpoint written before the state checksum loads with a warning that its state is not
checked.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save as save_safetensors_bytes
from torch import Tensor, nn

from crl._lock import fsync_directory, full_disk_reported, write_atomically
from crl._validate import missing_file
from crl.train.config import TrainConfig, parse_saved_config
from crl.train.cursor import CursorState

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "LogWindow",
    "OptimizerState",
    "StreamStates",
    "TrainState",
    "list_checkpoints",
    "load_checkpoint",
    "load_optimizer_state",
    "load_train_state",
    "newest_checkpoint",
    "optimizer_state",
    "remove_orphans",
    "resolve_checkpoint",
    "save_checkpoint",
    "save_train_state",
]

_NAME = re.compile(r"^step-(\d{8,})\.json$")
_FILE = re.compile(r"^step-\d{8,}\.(json|safetensors)$")
_PARTNER = {".json": ".safetensors", ".safetensors": ".json"}
_CHECKSUM = "safetensors_sha256"
_STATE_CHECKSUM = "state_sha256"


class CheckpointError(ValueError):
    """A checkpoint file is damaged (truncated, changed on disk, or its files disagree); the message names it."""


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint: its step, tensors (by key) and JSON state."""

    path: Path
    step: int
    tensors: dict[str, Tensor]
    state: dict[str, Any]


def save_checkpoint(
    directory: str | Path, step: int, tensors: dict[str, Tensor], state: dict[str, Any], *, keep: int
) -> Path:
    """Write the checkpoint of ``step`` atomically into ``directory`` (created if missing); return its
    safetensors path. ``tensors`` are moved to CPU; ``state`` is JSON-able (``step`` and both sha256 are added).
    Then delete all but the newest ``keep`` (>= 1) checkpoints up to ``step``, every one after it, and the
    files of incomplete ones (:func:`remove_orphans`).

    Raises:
        DiskFullError: if the disk fills up (naming the file and the checkpoint a rerun resumes from).
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1 (checkpoints to keep), got {keep!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensor_path, json_path = directory / f"step-{step:08d}.safetensors", directory / f"step-{step:08d}.json"
    cpu = {key: value.detach().to("cpu").contiguous() for key, value in tensors.items()}
    payload = save_safetensors_bytes(cpu, metadata={"step": str(step)})
    checksum = hashlib.sha256(payload).hexdigest()
    recorded = json.loads(json.dumps({**state, "step": step, _CHECKSUM: checksum}))
    recorded[_STATE_CHECKSUM] = _state_digest(recorded)
    document = json.dumps(recorded, indent=1, sort_keys=True)
    last = newest_checkpoint(directory)
    with full_disk_reported(tensor_path, last):
        write_atomically(tensor_path, payload)
    try:
        with full_disk_reported(json_path, last):
            write_atomically(json_path, document.encode("utf-8"))
    except OSError:
        tensor_path.unlink(missing_ok=True)
        raise
    fsync_directory(directory)
    _prune(directory, keep, step)
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
            f"checkpoint {str(path)!r} {missing_file(path.with_suffix('.safetensors'))}; pass a step-*.safetensors "
            "file or a run folder"
        )
    return path.with_suffix(".safetensors")


def remove_orphans(directory: str | Path) -> list[Path]:
    """Delete the checkpoint files in ``directory`` whose partner is missing, each with a warning naming it: a
    ``step-<t>.safetensors`` without its ``.json`` (a run killed between the two writes) or the reverse.

    Call it only while holding the run folder's lock, so no live writer is between its two writes.

    Returns:
        The deleted files.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    orphans = [
        entry
        for entry in sorted(directory.iterdir())
        if _FILE.match(entry.name) and not entry.with_suffix(_PARTNER[entry.suffix]).is_file()
    ]
    for orphan in orphans:
        warnings.warn(
            f"checkpoint file {str(orphan)!r} has no {orphan.stem}{_PARTNER[orphan.suffix]} beside it (a write "
            "cut short); removing it",
            stacklevel=2,
        )
        orphan.unlink(missing_ok=True)
    return orphans


def _prune(directory: Path, keep: int, step: int) -> None:
    """Keep the newest ``keep`` checkpoints up to ``step``; delete the rest, any after it (stale since a resume),
    and the files of incomplete checkpoints."""
    remove_orphans(directory)
    found = list_checkpoints(directory)
    upto = [path for saved, path in found if saved <= step]
    for tensor_path in upto[:-keep] + [path for saved, path in found if saved > step]:
        tensor_path.with_suffix(".json").unlink(missing_ok=True)
        tensor_path.unlink(missing_ok=True)


def _damaged(path: Path, reason: str) -> CheckpointError:
    return CheckpointError(
        f"checkpoint file {str(path)!r} is damaged: {reason}; pass another checkpoint (crl train resumes from "
        "the newest intact one by itself)"
    )


def _read_document(json_path: Path) -> dict[str, Any]:
    try:
        document = json.loads(json_path.read_bytes().decode("utf-8"))
    except ValueError as error:
        raise _damaged(json_path, f"not valid JSON ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("step"), int):
        raise _damaged(json_path, 'not a JSON object with an integer "step"')
    return document


def _state_digest(document: dict[str, Any]) -> str:
    """The sha256 of a checkpoint's JSON state in canonical form (sorted keys, no whitespace), without its own
    ``state_sha256`` entry; ``document`` must be as read back from JSON (lists, string keys)."""
    content = {key: value for key, value in document.items() if key != _STATE_CHECKSUM}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _check_state(json_path: Path, document: dict[str, Any]) -> None:
    """Check (and remove) the ``state_sha256`` of a checkpoint's JSON; one without it is warned about."""
    recorded = document.pop(_STATE_CHECKSUM, None)
    if recorded is None:
        warnings.warn(
            f"checkpoint file {str(json_path)!r} carries no state checksum (written by an earlier crl): a change "
            "to its JSON state cannot be detected; the checkpoints written from now on carry one",
            stacklevel=3,
        )
    elif recorded != _state_digest(document):
        raise _damaged(
            json_path, "its state differs from the state_sha256 recorded in it (edited or damaged)"
        )


def _read_tensors(tensor_path: Path, recorded: object) -> tuple[dict[str, Tensor], object]:
    """The tensors and metadata step of a safetensors file whose sha256 must be ``recorded`` (if not None)."""
    payload = tensor_path.read_bytes()
    if recorded is not None and hashlib.sha256(payload).hexdigest() != recorded:
        raise _damaged(tensor_path, f"its sha256 differs from the one in {tensor_path.stem}.json")
    try:
        header = json.loads(payload[8 : 8 + int.from_bytes(payload[:8], "little")])
        return load_safetensors_bytes(payload), header.get("__metadata__", {}).get("step")
    except (SafetensorError, ValueError) as error:
        raise _damaged(tensor_path, f"not a valid safetensors file ({error})") from None


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint (give its .safetensors or .json path), checking it is intact.

    Raises:
        FileNotFoundError: if either file of the checkpoint is missing.
        CheckpointError: if the JSON does not parse, its state or the tensors differ from the sha256 recorded
            in the JSON, or the JSON's step differs from the tensors' metadata or the file name.

    Warns:
        UserWarning: if the JSON carries no state checksum (written before it was added); it loads.
    """
    tensor_path, json_path = Path(path).with_suffix(".safetensors"), Path(path).with_suffix(".json")
    for required in (tensor_path, json_path):
        if not required.is_file():
            raise FileNotFoundError(
                f"checkpoint file {str(required)!r} is missing; pass a step-*.safetensors file of a run folder"
            )
    state = _read_document(json_path)
    _check_state(json_path, state)
    tensors, metadata_step = _read_tensors(tensor_path, state.pop(_CHECKSUM, None))
    named = _NAME.match(json_path.name)
    if metadata_step != str(state["step"]) or (named and int(named.group(1)) != state["step"]):
        raise _damaged(
            json_path,
            f'its "step" {state["step"]} differs from its name or the step {metadata_step} of its tensors',
        )
    return Checkpoint(path=tensor_path, step=state["step"], tensors=tensors, state=state)


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
    """One rank's generator states (``get_state`` tensors) of its streams: order, views, negatives (not init)."""

    order: Tensor
    views: Tensor
    negatives: Tensor


def _with_prefix(prefix: str, tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    return {f"{prefix}{key}": value for key, value in tensors.items()}


def _strip(prefix: str, tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    return {key.removeprefix(prefix): value for key, value in tensors.items() if key.startswith(prefix)}


@dataclass(frozen=True)
class LogWindow:
    """The log window open at a checkpoint: the losses summed since the last ``metrics.jsonl`` row, per rank
    (exact float values), over ``steps`` steps; restoring it makes a resumed run log the same rows."""

    steps: int = 0
    loss_sums: tuple[float, ...] = ()


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
        log_window: the trainer's open log window (empty for the pure loop and older checkpoints).
        estimator: the loss estimator's tensors (fastclip's u_i; empty for minibatch and older checkpoints).
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
    log_window: LogWindow = LogWindow()
    estimator: dict[str, Tensor] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        """K, the number of processes that trained the run."""
        return len(self.streams)

    def to_tensors(self) -> tuple[dict[str, Tensor], dict[str, Any]]:
        """(the safetensors content by key, the JSON document); see the module docstring for the keys."""
        tensors = {**_with_prefix("model.", self.model), **self.optimizer.tensors}
        for rank, states in enumerate(self.streams):
            for stream in fields(states):
                tensors[f"rng.{stream.name}.rank{rank}"] = getattr(states, stream.name)
        tensors.update(_with_prefix("sampler.", self.sampler) | _with_prefix("estimator.", self.estimator))
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
            "log_window": {"steps": self.log_window.steps, "loss_sums": list(self.log_window.loss_sums)},
        }
        return tensors, document

    @classmethod
    def from_tensors(
        cls, tensors: dict[str, Tensor], document: dict[str, Any], *, source: str = "checkpoint"
    ) -> TrainState:
        """Read back what :meth:`to_tensors` wrote (``source`` names the file in config errors)."""
        streams = tuple(
            StreamStates(
                **{stream.name: tensors[f"rng.{stream.name}.rank{rank}"] for stream in fields(StreamStates)}
            )
            for rank in range(int(document["world_size"]))
        )
        data, window = document["data"], document.get("log_window", {})
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
            config=parse_saved_config(document["config"], source=f"{source} (saved config)"),
            anchor_shape=tuple(document["anchor_shape"]),
            positive_shape=tuple(document["positive_shape"]),
            log_window=LogWindow(int(window.get("steps", 0)), tuple(window.get("loss_sums", ()))),
            estimator=_strip("estimator.", tensors),
        )


def save_train_state(directory: str | Path, state: TrainState, *, keep: int) -> Path:
    """Write ``state`` as the checkpoint of its step (atomically; see :func:`save_checkpoint`)."""
    tensors, document = state.to_tensors()
    return save_checkpoint(directory, state.step, tensors, document, keep=keep)


def load_train_state(path: str | Path) -> TrainState:
    """The :class:`TrainState` of a checkpoint (its .safetensors or .json path).

    Raises:
        CheckpointError: if the checkpoint is damaged or lacks an entry (naming the file).
    """
    checkpoint = load_checkpoint(path)
    try:
        return TrainState.from_tensors(checkpoint.tensors, checkpoint.state, source=str(checkpoint.path))
    except (KeyError, TypeError) as error:
        raise _damaged(checkpoint.path, f"the entry {error} is missing or malformed") from None
