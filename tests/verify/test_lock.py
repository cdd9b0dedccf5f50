"""One writer per `crl verify --out` folder (issue 9 item 1): a second verify into a folder in use stops at once
naming the holder, touching nothing (not even with --fresh); a holder killed with SIGKILL blocks nothing."""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from crl._lock import FolderLock
from crl.claims import Registry
from tests.verify.test_verify import ToyRaises, _invoke

_HOLD = "import sys, time; from pathlib import Path; from crl._lock import FolderLock\n"
_HOLD += (
    "lock = FolderLock(Path(sys.argv[1]), command='crl verify'); print('held', flush=True); time.sleep(120)"
)


def test_a_second_verify_into_a_folder_in_use_stops_naming_the_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a second verify wrote into the same results.sqlite and report, and --fresh deleted the first's
    database under it. Now it exits with status 2 naming the holder's pid and host, and deletes nothing."""
    out = tmp_path / "v"
    out.mkdir()
    sqlite3.connect(out / "results.sqlite").close()
    with FolderLock(out, command="crl verify"):
        result = _invoke(
            monkeypatch, Registry.of([ToyRaises()]), "--fidelity", "quick", "--out", str(out), "--fresh"
        )
    message = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"is in use by crl verify (pid {os.getpid()} on host {socket.gethostname()}" in message
    assert (out / "results.sqlite").exists() and not (out / "report.md").exists()


def test_a_killed_verify_leaves_no_lock_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A verify killed with SIGKILL leaves its lock file; the next verify into that folder runs all the same."""
    out = tmp_path / "v"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    result = _invoke(monkeypatch, Registry.of([ToyRaises()]), "--fidelity", "quick", "--out", str(out))
    assert result.exit_code == 1, result.output  # the toy claim's own ERROR, not a refusal
    assert (out / ".crl.lock").exists() and (out / "report.md").exists()
