"""A run's log: ``metrics.jsonl`` and TensorBoard events of rank 0, and the open log window of each rank.

``metrics.jsonl`` holds one JSON row per ``log_every`` steps (and a ``heldout/`` row per ``eval_every`` steps).
On resume, rows after the resumed step are dropped; a half-written last line (a write cut short, e.g. by a full
disk) is dropped with a warning naming the file, and a corrupt line before it is an error naming the file and
line. The loss of a row is the mean over its window of steps; the open window's per-rank sums are saved in each
checkpoint (:class:`~crl.train.checkpoint.LogWindow`), so a run resumed off a ``log_every`` boundary logs the
same rows as an uninterrupted one. A full disk is one clear error (:mod:`crl._lock`).
"""

from __future__ import annotations

import contextlib
import json
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from crl._lock import full_disk_reported, write_atomically
from crl.train.checkpoint import LogWindow, newest_checkpoint

__all__ = ["LogWindowSum", "RunLog", "rows_up_to"]


def rows_up_to(path: Path, step: int) -> list[str]:
    """The lines of ``metrics.jsonl`` with ``"step" <= step``; a partial last line (a write cut short, e.g. by a
    full disk) is dropped with a warning, a corrupt line before it is an error naming the file and line."""
    numbered = [
        (number, line)
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if line.strip()
    ]
    kept = []
    for number, line in numbered:
        try:
            before = json.loads(line)["step"] <= step
        except (ValueError, KeyError, TypeError):
            if number != numbered[-1][0]:
                raise ValueError(
                    f"{path} line {number} is not a JSON row with a step ({line[:80]!r}); delete or fix that "
                    "line, then rerun"
                ) from None
            warnings.warn(
                f"{path} ends in a partial line, left by a write cut short; dropping it ({line[:80]!r})",
                stacklevel=3,
            )
            continue
        if before:
            kept.append(line)
    return kept


class RunLog:
    """metrics.jsonl and TensorBoard events of rank 0; rows after the resumed step are dropped on resume."""

    def __init__(self, run_dir: Path, *, resumed_step: int, tensorboard: bool) -> None:
        self.path = run_dir / "metrics.jsonl"
        self.checkpoints = run_dir / "checkpoints"
        if self.path.exists():
            kept = "".join(f"{line}\n" for line in rows_up_to(self.path, resumed_step))
            with self._full_disk_reported():
                write_atomically(self.path, kept.encode("utf-8"))
        self.handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self.writer: Any = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=resumed_step + 1)

    def _full_disk_reported(self) -> contextlib.AbstractContextManager[None]:
        return full_disk_reported(self.path, lambda: newest_checkpoint(self.checkpoints))

    def write(self, row: dict[str, float], *, prefix: str = "train/") -> None:
        """Append one row to metrics.jsonl (flushed) and its scalars to TensorBoard, under ``prefix`` unless a
        name already has a section (``heldout/accuracy@1``)."""
        with self._full_disk_reported():
            self.handle.write(json.dumps(row) + "\n")
            self.handle.flush()
        if self.writer is not None:
            step = int(row["step"])
            for key, value in row.items():
                if key != "step":
                    self.writer.add_scalar(key if "/" in key else f"{prefix}{key}", value, step)

    def close(self) -> None:
        """Close metrics.jsonl and the TensorBoard writer."""
        with self._full_disk_reported():
            self.handle.close()
        if self.writer is not None:
            self.writer.close()


class LogWindowSum:
    """This rank's open log window: the losses summed since the last row, their number, and the steps timed
    (in this process) since ``tick``, for pairs_per_s."""

    def __init__(self, saved: LogWindow, rank: int, device: torch.device) -> None:
        self.loss_sum = torch.tensor(saved.loss_sums[rank] if saved.loss_sums else 0.0, device=device)
        self.steps = saved.steps if saved.loss_sums else 0
        self.timed, self.tick = 0, time.perf_counter()

    def add(self, loss: Tensor) -> None:
        """Count one step's loss."""
        self.loss_sum += loss
        self.steps += 1
        self.timed += 1

    def reset(self) -> None:
        """Open the next window."""
        self.loss_sum.zero_()
        self.steps, self.timed, self.tick = 0, 0, time.perf_counter()
