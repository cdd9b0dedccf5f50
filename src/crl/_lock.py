"""Safe writing into a folder: one writer (an exclusive ``flock``), atomic files, no leftovers, a clear full disk.

``crl train`` holds the lock of its run folder for the whole run (under torchrun, rank 0 holds it) and
``crl verify`` the lock of its ``--out`` folder, so a second process writing into the same folder stops at once
with a message naming the holder's pid and host instead of interleaving checkpoints, logs or results.

The lock (``FOLDER/.crl.lock``) is the kernel's: it is released when its holder closes the file or dies, however
it dies (``kill -9`` included), so a stale lock file never blocks a rerun; the file itself is never deleted
(deleting a lock file lets two processes hold locks on two different files). The sidecar
``FOLDER/.crl.lock.holder`` (JSON: pid, host, command, started) only makes the message useful; it is written
after the lock is taken and removed before it is released.

Each command that writes a report into a folder records which one it is in ``FOLDER/.crl.kind`` (JSON:
``command``, and ``report_items``, what its last report covered) through :func:`claim_folder`, under the lock: a
folder holding another command's results (a ``crl verify`` over a ``crl experiment mstar`` folder) is refused, and
:func:`check_report_items` refuses a report that would cover no item (cells, claims) and reports one covering
fewer than the report it replaces, which the command then keeps under another name. A folder without that file
is recognised by the files each command leaves (:data:`SIGNS`).

Files are written by :func:`write_atomically` (a ``.NAME.tmp-PID`` temporary, fsync'ed, then ``os.replace``d);
a failed write removes its temporary and the lock holder removes those of killed writers
(:func:`remove_temporaries`). A full disk (ENOSPC) is reported as one :class:`DiskFullError` line naming the
file and where the run resumes (:func:`full_disk_reported`).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

__all__ = [
    "KIND_FILE",
    "LOCK_FILE",
    "SIGNS",
    "DiskFullError",
    "FolderLock",
    "FolderLockedError",
    "check_report_items",
    "claim_folder",
    "fsync_directory",
    "full_disk_reported",
    "remove_temporaries",
    "write_atomically",
]

LOCK_FILE = ".crl.lock"
_HOLDER_FILE = f"{LOCK_FILE}.holder"
KIND_FILE = ".crl.kind"
"""The file naming the command whose results a folder holds."""
SIGNS = {
    "crl experiment mstar": ("mstar.png", "curves.png", "advisor_check.md"),
    "crl verify": ("report.html", "figures", "tables"),
    "crl advise": ("advice.json", "mstar.json", "advise.sqlite"),
}
"""Files only one command writes: a folder without :data:`KIND_FILE` holding one of them is that command's."""


class FolderLockedError(OSError):
    """Another process holds the folder's lock (the message names its pid and host and the fix)."""


@dataclass(frozen=True)
class _Holder:
    """Who holds a lock, as written in the sidecar file."""

    pid: int
    host: str
    command: str
    started: str

    def describe(self) -> str:
        """E.g. ``crl train (pid 4242 on host gpu-3, since 2026-01-01T12:00:00+00:00)``."""
        return f"{self.command} (pid {self.pid} on host {self.host}, since {self.started})"


def _read_holder(path: Path) -> _Holder | None:
    """The holder recorded in ``path``, or ``None`` when it is missing or unreadable (being written)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return _Holder(int(data["pid"]), str(data["host"]), str(data["command"]), str(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class FolderLock:
    """The exclusive lock of ``folder`` for ``command`` (a context manager; :meth:`release` also works).

    Args:
        folder: the folder to lock (created when missing).
        command: what the holder is doing, for the other process's message (``"crl train"``).

    Raises:
        FolderLockedError: if another process (or another ``FolderLock`` in this one) holds the lock.

    Examples:
        >>> with FolderLock(Path("runs/fashion"), command="crl train"):  # doctest: +SKIP
        ...     train()
    """

    def __init__(self, folder: Path, *, command: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._holder_path = folder / _HOLDER_FILE
        self._fd: int | None = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            raise FolderLockedError(self._locked_message(command)) from None
        try:
            self._write_holder(command)
        except BaseException:
            self.release()
            raise

    def _locked_message(self, command: str) -> str:
        holder = _read_holder(self._holder_path)
        who = holder.describe() if holder is not None else "another process (pid and host not recorded yet)"
        return (
            f"{str(self.folder)!r} is in use by {who}; only one process may write into it. Wait for it to "
            f"finish or stop it, then rerun {command} (a stopped run resumes), or write into another folder"
        )

    def _write_holder(self, command: str) -> None:
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        temporary = self._holder_path.with_name(f"{_HOLDER_FILE}.tmp-{os.getpid()}")
        temporary.write_text(json.dumps(holder), encoding="utf-8")
        os.replace(temporary, self._holder_path)

    def release(self) -> None:
        """Remove the sidecar and release the lock (a second call does nothing)."""
        if self._fd is None:
            return
        self._holder_path.unlink(missing_ok=True)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class DiskFullError(OSError):
    """The disk filled up (errno ENOSPC) while crl wrote a file; the message names the file and the fix."""

    def __str__(self) -> str:
        return str(self.strerror)


@contextmanager
def full_disk_reported(path: Path, resumes_from: Path | Callable[[], Path | None] | None) -> Iterator[None]:
    """Turn an ENOSPC ``OSError`` raised inside into a :class:`DiskFullError` naming ``path`` (being written)
    and ``resumes_from``, the checkpoint a rerun resumes from (``None``: step 0), or a function that finds it
    (called only when the disk is full)."""
    try:
        yield
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        if callable(resumes_from):
            resumes_from = resumes_from()
        where = (
            f"the run resumes from {resumes_from}" if resumes_from is not None else "the run starts at step 0"
        )
        message = f"no space left on device while writing {path}; free space and rerun ({where})"
        raise DiskFullError(errno.ENOSPC, message) from error


def fsync_directory(directory: Path) -> None:
    """fsync a folder, so the names of files just moved into it survive a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` through ``.NAME.tmp-PID`` (fsync'ed, then ``os.replace``d); a failed
    write removes its temporary."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(temporary, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def remove_temporaries(folder: Path) -> list[Path]:
    """Delete the ``.*.tmp-PID`` files that killed writers left in ``folder``; returns them.

    Call it only while holding the folder's lock, so no live writer owns them.
    """
    found = sorted(folder.glob(".*.tmp-*"))
    for temporary in found:
        temporary.unlink(missing_ok=True)
    return found


def _recorded_kind(folder: Path) -> dict[str, object] | None:
    """The JSON of ``folder``'s :data:`KIND_FILE`, or the command its files show (:data:`SIGNS`), or None."""
    try:
        recorded = json.loads((folder / KIND_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        shown = [command for command, names in SIGNS.items() if any((folder / n).exists() for n in names)]
        return {"command": shown[0]} if shown else None
    except (OSError, ValueError):
        return None
    return recorded if isinstance(recorded, dict) else None


def claim_folder(folder: Path, command: str) -> None:
    """Record that ``folder`` holds ``command``'s results (call it holding the folder's lock).

    Raises:
        ValueError: naming the folder, the command whose results it holds and the fix, when that is another.
    """
    recorded = _recorded_kind(folder)
    holder = recorded.get("command") if recorded is not None else None
    if holder is not None and holder != command:
        raise ValueError(
            f"{folder} holds the results of {holder}, whose report {command} would replace; pass another --out"
        )
    if not (folder / KIND_FILE).is_file():
        write_atomically(folder / KIND_FILE, json.dumps({"command": command}).encode("utf-8"))


def check_report_items(folder: Path, items: int, what: str) -> int | None:
    """Record that the report about to be written into ``folder`` covers ``items`` ``what`` (cells, claims); call
    it holding the folder's lock. Returns the count of the report it replaces when that one covered more (the
    caller keeps that report under another name and says so), else None.

    Raises:
        ValueError: naming the folder and the fix, when ``items`` is 0 (a wrong option, or a store that lost its
            results): the report would be empty.
    """
    recorded = _recorded_kind(folder) or {}
    before = recorded.get("report_items")
    if items == 0:
        raise ValueError(
            f"the report of {folder} would cover no {what}; check the options that choose them (--data, "
            "--fidelity, --claims), or the results store"
        )
    write_atomically(folder / KIND_FILE, json.dumps({**recorded, "report_items": items}).encode("utf-8"))
    return before if isinstance(before, int) and items < before else None
