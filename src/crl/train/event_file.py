"""TensorBoard scalars of a run, written in the caller's thread.

``torch.utils.tensorboard.SummaryWriter`` writes from a background thread: a failed write (a full disk) ends that
thread with a traceback naming no file and reaches the caller only at a later call. :class:`EventFile` writes
the same records (tensorboard's event-file format, :class:`~tensorboard.summary.writer.record_writer.RecordWriter`)
synchronously and flushes after each call, so an ``OSError`` is raised where the scalars are added.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path

from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter

__all__ = ["EventFile"]

_FILE_VERSION = "brain.Event:2"
_NUMBERS = itertools.count()


class EventFile:
    """One TensorBoard event file in ``folder`` (created if missing), named as TensorBoard's writers name theirs.

    Args:
        folder: the event folder (``run_dir/tensorboard``).
        purge_step: events of steps >= ``purge_step`` in older files of the folder are hidden from TensorBoard
            (those a resumed run writes again).

    Raises:
        OSError: if the folder or file cannot be created or written.
    """

    def __init__(self, folder: Path, *, purge_step: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{next(_NUMBERS)}"
        self.path = folder / name
        self._records = RecordWriter(open(self.path, "wb"))  # noqa: SIM115 (closed in close())
        try:
            self._add(Event(wall_time=time.time(), file_version=_FILE_VERSION))
            self._add(Event(wall_time=time.time(), step=purge_step, file_version=_FILE_VERSION))
            start = SessionLog(status=SessionLog.START)
            self._add(Event(wall_time=time.time(), step=purge_step, session_log=start))
            self._records.flush()
        except OSError:
            with contextlib.suppress(OSError):
                self._records.close()
            raise

    def _add(self, event: Event) -> None:
        self._records.write(event.SerializeToString())

    def add_scalars(self, scalars: Mapping[str, float], step: int) -> None:
        """Write one scalar event per ``tag: value`` at ``step`` and flush."""
        for tag, value in scalars.items():
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value))])
            self._add(Event(wall_time=time.time(), step=step, summary=summary))
        self._records.flush()

    def close(self) -> None:
        """Flush and close the file."""
        self._records.close()
