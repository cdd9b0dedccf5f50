"""``crl milvus start|stop|status --dir D``: a detached Milvus server found again by its folder.

If these fail, the README's way to start the vector database does not work: the server dies with the command
that started it, status or stop cannot find it, a second start from the same folder starts a second server, or a
taken port hangs the start instead of naming the port and the fix.
"""

import http.server
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crl.commands import app
from crl.search.milvus import MilvusIndex
from crl.search.milvus_local import _healthy, free_port
from tests.milvus_server import listening


def _crl(*args: str) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``crl ARGS`` run through the app."""
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie counts as gone)."""
    stat = Path(f"/proc/{pid}/stat")
    return stat.is_file() and stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z"


def test_a_taken_port_fails_at_once_naming_it_and_the_fix(tmp_path: Path) -> None:
    """A client port another process listens on stops the start within seconds (no 180 s wait), naming the port
    and --port; nothing is left running or recorded."""
    pytest.importorskip("milvus", reason="the milvus package (crl[milvus]) is not installed")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        began = time.monotonic()
        status, _, err = _crl("milvus", "start", "--dir", str(tmp_path / "m"), "--port", str(port))
    assert time.monotonic() - began < 10
    assert status == 2 and f"port {port} on 127.0.0.1 is taken" in err and "--port 0" in err
    assert not (tmp_path / "m" / "crl-milvus.json").exists()
    assert _crl("milvus", "status", "--dir", str(tmp_path / "m"))[0] == 1


def test_without_the_milvus_package_start_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the extra crl[milvus], start is one error line naming the install, not an ImportError's
    traceback."""
    monkeypatch.setitem(sys.modules, "milvus", None)
    status, _, err = _crl("milvus", "start", "--dir", str(tmp_path / "m"), "--port", "0")
    assert status == 2 and err.strip().endswith("pip install 'crl[milvus]'") and err.count("error:") == 1


def _held_on_ipv6_loopback() -> socket.socket:
    """A socket listening on [::1] at a port free on 127.0.0.1 too (another program on localhost's IPv6 side)."""
    while True:
        holder = socket.socket(socket.AF_INET6)
        holder.bind(("::1", 0))
        holder.listen()
        try:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", holder.getsockname()[1]))
            return holder
        except OSError:
            holder.close()


@pytest.mark.slow
def test_start_status_stop_round_trip(tmp_path: Path) -> None:
    """start returns with the server answering at the port asked for (a collection can be created at the printed
    address, though another program holds [::1] at that port: Milvus moved its proxy to a random port then,
    while crl printed the one asked for), the server outlives nothing of the command, the host sees only its two
    published ports, on 127.0.0.1, status finds it, a second start from the folder is refused, and stop ends
    its processes and frees its ports."""
    pytest.importorskip("milvus", reason="the milvus package (crl[milvus]) is not installed")
    from pymilvus import connections

    folder = str(tmp_path / "m")
    with _held_on_ipv6_loopback() as held:
        port = held.getsockname()[1]
        status, out, err = _crl("milvus", "start", "--dir", folder, "--port", str(port))
        if status != 0 and not os.environ.get("CI"):
            pytest.skip(f"the Milvus server did not start here: {err.strip()}")
        assert status == 0, err
        address = out.split()[1]
        assert address == f"milvus://127.0.0.1:{port}" and "network namespace of its own" in err
        assert "no Milvus authorization" in err
        try:
            status, shown, _ = _crl("milvus", "status", "--dir", folder)
            assert status == 0 and shown.split()[1] == address
            pid = int(shown.split("(pid ")[1].split(",")[0])
            assert _alive(pid) and os.getsid(pid) == pid
            record = json.loads((Path(folder) / "crl-milvus.json").read_text())
            published = sorted(listening(pid))
            assert published == sorted(f"127.0.0.1:{p}" for p in (port, record["metrics_port"]))
            assert sorted(record["listening"]) == sorted((port, record["metrics_port"]))
            collection = MilvusIndex.create(f"{address}/round_trip", 4)
            assert len(collection) == 0
            again, _, refused = _crl("milvus", "start", "--dir", folder)
            assert again == 2 and f"already runs from {Path(folder).resolve()} (pid {pid}" in refused
        finally:
            for alias, _ in connections.list_connections():
                connections.disconnect(alias)
            stopped, said, _ = _crl("milvus", "stop", "--dir", folder)
    assert stopped == 0 and said.strip() == f"stopped pid {pid}"
    assert not _alive(pid) and listening(pid) == []
    assert _crl("milvus", "status", "--dir", folder)[:2] == (
        1,
        f"not running: no Milvus server runs from {folder}\n",
    )
    assert _crl("milvus", "stop", "--dir", folder)[1].startswith("no Milvus server runs from")


@pytest.mark.slow  # waits out a Milvus start: 15 s
def test_a_start_that_does_not_answer_in_time_is_stopped_and_quotes_its_log(tmp_path: Path) -> None:
    """--timeout 1 (Milvus needs several seconds): one error line naming the timeout and the log, the server's
    process stopped (no Milvus left listening from the folder), no record."""
    pytest.importorskip("milvus", reason="the milvus package (crl[milvus]) is not installed")
    folder = tmp_path / "m"
    status, _, err = _crl("milvus", "start", "--dir", str(folder), "--port", "0", "--timeout", "1")
    assert status == 2 and "did not answer within 1 s and was stopped" in err
    assert str(folder.resolve() / "logs" / "milvus-stderr.log") in err
    assert not (folder / "crl-milvus.json").exists()
    binary = str(folder.resolve() / "bin" / "milvus").encode()
    for process in Path("/proc").glob("[0-9]*"):
        try:
            command = (process / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        assert command != binary or not _alive(int(process.name)), f"pid {process.name} still runs"


def test_the_health_probe_reads_only_a_200_ok_on_loopback() -> None:
    """If this fails, `crl milvus start` takes a server for ready on an error page or a closed port, or misses one
    that answers 200 OK (checked against the standard library's own HTTP server on 127.0.0.1)."""

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/healthz"
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(b"OK" if ok else b"no")

        def log_message(self, *args: object) -> None:
            return

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert _healthy(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
    assert not _healthy(free_port())
