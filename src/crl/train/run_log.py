"""A run's log: ``metrics.jsonl`` and TensorBoard events of rank 0, and the open log window of each rank.

``metrics.jsonl`` holds one JSON row per ``log_every`` steps (and a ``heldout/`` row per ``eval_every`` steps).
On resume, rows after the resumed step are dropped; a half-written last line (a write cut short, e.g. by a full
disk) is dropped with a warning naming the file, and a corrupt line before it is an error naming the file and
line. The rows kept are checked for missing steps (lines deleted) and steps out of order: a warning with their
count and the file, the run goes on. The loss of a row is the mean over its window of steps; the open window's
per-rank sums are saved in each checkpoint (:class:`~crl.train.checkpoint.LogWindow`), so a run resumed off a
``log_every`` boundary logs the same rows as an uninterrupted one. A full disk while writing ``metrics.jsonl``
is one clear error naming it (:mod:`crl._lock`); TensorBoard events (:mod:`crl.train.event_file`) are secondary:
a failed write stops them with a warning naming the run folder, and training and ``metrics.jsonl`` go on.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from crl._lock import full_disk_reported, write_atomically
from crl.train.checkpoint import LogWindow, newest_checkpoint
from crl.train.event_file import EventFile

if TYPE_CHECKING:
    from crl.train.event_file import EventFile

__all__ = ["LogWindowSum", "RunLog", "log_irregularities", "rows_up_to"]


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


def _irregular_steps(steps: list[int], every: int, upto: int) -> tuple[int, int]:
    """(rows missing, rows out of order) among the steps of one kind of row, logged every ``every`` steps (0:
    not logged) up to step ``upto``. Missing rows are counted only when every step is a multiple of ``every``
    (``log_every`` may have changed on an earlier resume; then only the order is checked)."""
    out_of_order = sum(later <= earlier for earlier, later in itertools.pairwise(steps))
    if every <= 0 or any(step % every for step in steps):
        return 0, out_of_order
    return len(set(range(every, upto + 1, every)) - set(steps)), out_of_order


def log_irregularities(lines: list[str], every: Mapping[str, int], upto: int) -> tuple[int, int]:
    """(rows missing, rows out of order) in the rows of ``metrics.jsonl`` kept on a resume from step ``upto``.

    Args:
        lines: the JSON rows, each with a ``"step"`` (:func:`rows_up_to`).
        every: the interval of each kind of row: ``"train"`` (rows with a loss, ``log_every``) and
            ``"heldout"`` (``eval_every``; 0 when there is no held-out evaluation).
        upto: the resumed step.
    """
    rows = [json.loads(line) for line in lines]
    missing, out_of_order = 0, 0
    for kind, interval in every.items():
        steps = [int(row["step"]) for row in rows if ("loss" in row) == (kind == "train")]
        kind_missing, kind_out_of_order = _irregular_steps(steps, interval, upto)
        missing, out_of_order = missing + kind_missing, out_of_order + kind_out_of_order
    return missing, out_of_order


def _warn_if_irregular(path: Path, lines: list[str], every: Mapping[str, int], upto: int) -> None:
    """Warn (the run goes on) when the rows kept on a resume miss steps or are out of order."""
    missing, out_of_order = log_irregularities(lines, every, upto)
    if missing or out_of_order:
        warnings.warn(
            f"{path} has {missing} rows missing and {out_of_order} rows out of order up to step {upto} "
            "(lines deleted or moved?); training goes on, but the log of those steps is incomplete",
            stacklevel=3,
        )


class RunLog:
    """metrics.jsonl and TensorBoard events of rank 0; rows after the resumed step are dropped on resume.

    Args:
        run_dir: the run folder.
        resumed_step: the step the run resumes from (0 for a fresh run).
        tensorboard: whether to write TensorBoard events into ``run_dir/tensorboard``.
        every: the interval of each kind of row (see :func:`log_irregularities`), to check the kept rows.
    """

    def __init__(
        self, run_dir: Path, *, resumed_step: int, tensorboard: bool, every: Mapping[str, int]
    ) -> None:
        self.path = run_dir / "metrics.jsonl"
        self.run_dir = run_dir
        self.checkpoints = run_dir / "checkpoints"
        if self.path.exists():
            lines = rows_up_to(self.path, resumed_step)
            _warn_if_irregular(self.path, lines, every, resumed_step)
            kept = "".join(f"{line}\n" for line in lines)
            with self._full_disk_reported():
                write_atomically(self.path, kept.encode("utf-8"))
        with self._full_disk_reported():
            self.handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self.events: EventFile | None = None
        if tensorboard:
            try:
                self.events = EventFile(run_dir / "tensorboard", purge_step=resumed_step + 1)
            except OSError as error:
                self._stop_tensorboard(error)

    def _full_disk_reported(self) -> contextlib.AbstractContextManager[None]:
        return full_disk_reported(self.path, lambda: newest_checkpoint(self.checkpoints))

    def _stop_tensorboard(self, error: OSError) -> None:
        """Warn that TensorBoard logging stopped (naming the run folder) and close its file as far as it goes."""
        warnings.warn(
            f"TensorBoard logging stopped: writing events into {self.run_dir / 'tensorboard'} of the run folder "
            f"{self.run_dir} failed ({error}); training goes on and {self.path} keeps every row",
            stacklevel=3,
        )
        events, self.events = self.events, None
        if events is not None:
            with contextlib.suppress(OSError):
                events.close()

    def write(self, row: dict[str, float], *, prefix: str = "train/") -> None:
        """Append one row to metrics.jsonl (flushed) and its scalars to TensorBoard, under ``prefix`` unless a
        name already has a section (``heldout/accuracy@1``).

        Raises:
            DiskFullError: if the disk is full while writing metrics.jsonl (naming it).
        """
        with self._full_disk_reported():
            self.handle.write(json.dumps(row) + "\n")
            self.handle.flush()
        if self.events is not None:
            scalars = {
                key if "/" in key else f"{prefix}{key}": value for key, value in row.items() if key != "step"
            }
            try:
                self.events.add_scalars(scalars, int(row["step"]))
            except OSError as error:
                self._stop_tensorboard(error)

    def close(self) -> None:
        """Close metrics.jsonl and the TensorBoard events."""
        with self._full_disk_reported():
            self.handle.close()
        if self.events is not None:
            try:
                self.events.close()
            except OSError as error:
                self._stop_tensorboard(error)


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
