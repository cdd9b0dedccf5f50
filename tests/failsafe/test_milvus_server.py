"""``crl milvus start|stop|status`` under faults: a starter killed mid-start, two starts on one folder, a copied
data folder, bad arguments, a kernel without network namespaces.

If these fail, a killed `crl milvus start` leaves a Milvus running that status calls "not running", stop cannot
stop and the next start waits for; a second start from the same folder quotes a Go panic and truncates the
first one's log; `stop --dir COPY` kills the original folder's server; `--timeout -5` starts a server that is
stopped at once; or a machine without network namespaces runs Milvus on every interface without a word.
"""

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crl.commands import app
from crl.search import milvus_local
from crl.search.milvus_local import RECORD_FILE


def _crl(*args: str) -> tuple[int, str]:
    """Exit status and stderr of ``crl ARGS`` run through the app."""
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stderr


def _processes_of(folder: Path) -> list[int]:
    """The processes whose command line names ``folder`` (its Milvus binary, the sandbox running it)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = cmdline.read_bytes()
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if str(folder).encode() in command and state != "Z":
            found.append(int(cmdline.parent.name))
    return found


def _runs_binary(folder: Path) -> bool:
    """Whether a process runs ``folder``'s Milvus binary."""
    binary = str(folder / "bin" / "milvus").encode()
    for pid in _processes_of(folder):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] == binary:
                return True
    return False


def _wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    """Whether ``condition()`` held within ``seconds`` (polled every 0.1 s)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """A server folder whose processes are all killed at the end, whatever the test left."""
    path = tmp_path / "m"
    yield path.resolve()
    for pid in _processes_of(path.resolve()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_start_killed_after_the_binary_launched_leaves_nothing_and_a_second_start_is_refused(
    folder: Path,
) -> None:
    """`crl milvus start` killed after Milvus launched left an orphan listening on every interface (status:
    "not running"; stop could not stop it; the next start waited 120 s), and a second start from the same
    folder truncated the first one's log and quoted a Go panic. Now a second start is refused at once in one
    line, the first one's log is untouched, and the first server dies with its starter."""
    pytest.importorskip("milvus", reason="the milvus package (crl[milvus]) is not installed")
    command = [sys.executable, "-m", "crl", "milvus", "start", "--dir", str(folder), "--port", "0"]
    starter = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        launched = _wait_for(lambda: _runs_binary(folder), 60)
        assert launched, "the Milvus binary did not launch within 60 s"
        log = folder / "logs" / "milvus-stderr.log"
        _wait_for(lambda: log.stat().st_size > 0, 10)
        before = log.read_bytes()
        status, err = _crl("milvus", "start", "--dir", str(folder), "--port", "0", "--timeout", "5")
        assert status == 2 and err.count("error:") == 1 and "Traceback" not in err and "panic" not in err, err
        assert "already runs from" in err or "another crl milvus start" in err, err
        assert log.read_bytes().startswith(before)
    finally:
        starter.kill()
        starter.wait()
    assert _wait_for(lambda: _processes_of(folder) == [], 15), f"left running: {_processes_of(folder)}"
    status, _ = _crl("milvus", "status", "--dir", str(folder))
    assert status == 1 and not (folder / RECORD_FILE).exists()


def test_stop_in_a_copied_folder_leaves_the_original_server_running(folder: Path, tmp_path: Path) -> None:
    """A data folder copied elsewhere carries its record, and `stop --dir COPY` killed the original's server.
    The record names its folder: in the copy it names no server of the copy (the original's is left running,
    and stopped by its own folder)."""
    folder.mkdir()
    sandbox = [
        sys.executable,
        "-I",
        str(milvus_local.SANDBOX),
        "--dir",
        str(folder),
        "--exposed",
        "--",
        "sleep",
        "60",
    ]
    server = subprocess.Popen(sandbox, stdin=subprocess.PIPE)
    try:
        record = milvus_local.ServerRecord(
            server.pid, 19530, 9091, str(folder), "2026-01-01T00:00:00+00:00", True, True
        )
        (folder / RECORD_FILE).write_text(json.dumps(dataclasses.asdict(record)), encoding="utf-8")
        copy = tmp_path / "copy"
        shutil.copytree(folder, copy)
        result = CliRunner().invoke(app, ["milvus", "stop", "--dir", str(copy)])
        assert result.exit_code == 0 and result.stdout.startswith("no Milvus server runs from"), result.output
        assert server.poll() is None and not (copy / RECORD_FILE).exists()
        assert _crl("milvus", "status", "--dir", str(folder))[0] == 0
        stopped = CliRunner().invoke(app, ["milvus", "stop", "--dir", str(folder)])
        assert stopped.stdout.strip() == f"stopped pid {server.pid}" and server.poll() is not None
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize("timeout", ["-5", "0", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(folder: Path, timeout: str) -> None:
    """`crl milvus start --timeout -5` was accepted: the server started and was stopped at once."""
    status, err = _crl("milvus", "start", "--dir", str(folder), "--port", "0", "--timeout", timeout)
    assert status == 2 and "--timeout 120" in err and "> 0" in err, err
    assert not (folder / "bin").exists() and not (folder / RECORD_FILE).exists()


def test_without_network_namespaces_start_refuses_naming_the_reason_and_exposed(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the kernel refuses a network namespace, start ran Milvus on every interface without a word; it
    refuses, naming the kernel's reason and --exposed, and starts nothing."""
    pytest.importorskip("milvus", reason="the milvus package (crl[milvus]) is not installed")
    reason = "unshare(CLONE_NEWNET|CLONE_NEWUSER): Operation not permitted"
    monkeypatch.setattr(milvus_local, "isolation_error", lambda: reason)
    status, err = _crl("milvus", "start", "--dir", str(folder), "--port", "0")
    assert (
        status == 2
        and reason in err
        and "--exposed" in err
        and err.count("error:") == 1
        and "Traceback" not in err
    ), err
    assert not (folder / "bin").exists() and not (folder / RECORD_FILE).exists()


def test_an_exposed_start_with_its_port_taken_on_ipv6_loopback_is_refused(folder: Path) -> None:
    """With [::1]:PORT taken, an exposed Milvus moved its proxy to a random port while crl printed and recorded
    the one asked for; the start is refused at once, naming the port."""
    pytest.importorskip("milvus", reason="the milvus package (crl[milvus]) is not installed")
    with socket.socket(socket.AF_INET6) as held:
        held.bind(("::1", 0))
        held.listen()
        port = held.getsockname()[1]
        status, err = _crl("milvus", "start", "--dir", str(folder), "--port", str(port), "--exposed")
    assert status == 2 and f"port {port} is taken" in err and "--port 0" in err, err
    assert not (folder / RECORD_FILE).exists() and _processes_of(folder) == []


def test_start_help_says_which_ports_are_published_and_how_to_run_exposed() -> None:
    """`crl milvus start --help` said the client port was "on 127.0.0.1" while every Milvus port listened on
    every interface; it says the client port is published on 127.0.0.1, the others stay in the server's
    namespace, and what --exposed does."""
    result = CliRunner().invoke(app, ["milvus", "start", "--help"], env={"COLUMNS": "200"})
    text = " ".join(result.output.split())
    assert result.exit_code == 0
    assert "published on 127.0.0.1" in text and "stay inside its network namespace" in text
    assert "--exposed" in text and "every interface" in text
