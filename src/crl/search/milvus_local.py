"""The packaged Milvus standalone server on this machine (the ``milvus`` package's binary, the extra crl[milvus]).

:func:`local_server` is a server object kept alive by the calling process (tests, benchmarks): ``start()``,
``stop()``, ``server_proc``. :func:`start_detached` starts one that outlives its caller, records its process and
ports in its folder (:data:`RECORD_FILE`), and :func:`stop_detached` / :func:`server_status` find it there again:
``crl milvus start|stop|status --dir D``.

Where it listens. The embedded etcd (its client port and its peer port, which the package leaves at etcd's fixed
2380, so two servers on one machine collided) is configured here through an etcd config file: both on 127.0.0.1,
on free ports. Every component advertises 127.0.0.1. Milvus 2.3.5's gRPC servers (proxy, coordinators, nodes)
and its metrics/health port listen on ``:PORT``, every interface, whatever the config says (its ``ip`` setting
is the advertised address only): nothing in the package binds them to loopback, and they take no password.
Keep the machine's firewall closed to them on a shared network (:data:`EXPOSED_WARNING`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "EXPOSED_WARNING",
    "LOOPBACK",
    "RECORD_FILE",
    "MilvusStartError",
    "ServerRecord",
    "local_server",
    "server_status",
    "start_detached",
    "stop_detached",
]

LOOPBACK = "127.0.0.1"
"""The address every component advertises, and etcd listens on."""

RECORD_FILE = "crl-milvus.json"
"""The file in a server's folder naming its process and ports (:class:`ServerRecord`)."""

ETCD_FILE = "embed-etcd.yaml"
"""The embedded etcd's own config (in the folder's ``configs``): its client and peer URLs on 127.0.0.1."""

METRICS_PORT = 9091
"""The first port tried for the server's health and metrics HTTP endpoint (the package's default)."""

EXPOSED_WARNING = (
    "Milvus 2.3.5 listens on every interface for its gRPC ports (the client port included) and its "
    "metrics port, without a password; only its etcd is on 127.0.0.1. On a shared network, keep the "
    "firewall closed to these ports."
)
"""What the local server exposes, said where it is started."""


class MilvusStartError(OSError):
    """The server did not come up: its process stopped, or it did not answer in time (the message names its
    log)."""


@dataclass(frozen=True)
class ServerRecord:
    """A detached server as :func:`start_detached` records it in ``folder/RECORD_FILE``.

    Attributes:
        pid: the server's process.
        port: its client (proxy) port: ``milvus://127.0.0.1:PORT/COLLECTION``.
        metrics_port: its health endpoint, ``http://127.0.0.1:METRICS_PORT/healthz``.
        etcd_ports: the embedded etcd's client and peer ports.
        folder: where it keeps its data, logs and config.
        started: when it answered first (UTC, ISO 8601).
    """

    pid: int
    port: int
    metrics_port: int
    etcd_ports: tuple[int, int]
    folder: str
    started: str

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, the host and port of a collection's address."""
        return f"{LOOPBACK}:{self.port}"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the system's choice)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def _etcd_config(folder: Path, client: int, peer: int) -> Path:
    """Write the embedded etcd's config (client and peer URLs on 127.0.0.1) into ``folder/configs``."""
    path = folder / "configs" / ETCD_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    client_url, peer_url = f"http://{LOOPBACK}:{client}", f"http://{LOOPBACK}:{peer}"
    path.write_text(
        f"name: crl\nlisten-client-urls: {client_url}\nadvertise-client-urls: {client_url}\n"
        f"listen-peer-urls: {peer_url}\ninitial-advertise-peer-urls: {peer_url}\n"
        f"initial-cluster: crl={peer_url}\n",
        encoding="utf-8",
    )
    return path


def _loopback_template(template: str, etcd_config: Path) -> str:
    """The package's milvus.yaml template with the embedded etcd reading ``etcd_config`` and every component's
    advertised ``ip`` set to 127.0.0.1."""
    embedded = "  use:\n    embed: true"
    if embedded not in template:
        raise ValueError(
            "the milvus package's config template has no 'etcd.use.embed: true'; install the milvus 2.3.5 "
            "package that crl[milvus] pins"
        )
    with_etcd = template.replace(embedded, f"{embedded}\n  config:\n    path: {etcd_config}", 1)
    return re.sub(r"^(\s*)ip:\s*#.*$", rf"\1ip: {LOOPBACK}", with_etcd, flags=re.MULTILINE)


def local_server(
    folder: str | Path,
    *,
    port: int = 19530,
    session_ttl_s: int = 30,
    exact_port: bool = False,
    etcd_ports: tuple[int, int] | None = None,
) -> Any:
    """A Milvus standalone server (the ``milvus`` package's ``MilvusServer``) keeping its data in ``folder``, its
    client port at ``port`` (the next free port above it when taken, read ``listen_port``; with ``exact_port``,
    ``start()`` fails at once instead), not started yet: ``start()`` (about 10 s), ``stop()``.

    Its embedded etcd listens on 127.0.0.1 at ``etcd_ports`` (client, peer; default: two ports free now), kept
    across restarts; what else it exposes: the module's docstring. ``session_ttl_s`` is the lease of the
    server's session (Milvus's default 30 s): a restart after a crash waits for the dead session's lease. A
    restart after a crash (``server_proc.kill()``, then ``start()``) listens on the same ports: the port probe
    binds beside the dead server's closing connections.

    Raises:
        ValueError: when the milvus package (the extra crl[milvus]) is not installed, naming the fix.
    """
    try:
        # the milvus package is the optional extra crl[milvus]: loaded where a local server is wanted
        from milvus import MilvusServer
    except ImportError:
        raise ValueError(
            "the local Milvus server is the milvus package of the extra crl[milvus], not installed here; "
            "pip install 'crl[milvus]'"
        ) from None

    base = Path(folder).resolve()
    server = MilvusServer()
    server.set_base_dir(str(base))
    etcd_client, etcd_peer = etcd_ports or (free_port(), free_port())
    server.config.template_text = _loopback_template(
        server.config.template_text, _etcd_config(base, etcd_client, etcd_peer)
    )
    server.config.update(etcd_port=etcd_client)
    if exact_port:
        server.config.update(proxy_port=port)
    server.listen_port = port
    server.config.set("common.session.ttl", session_ttl_s)
    server.config.try_bind_port = _bind_beside_closing_connections
    return server


def _bind_beside_closing_connections(port: int) -> socket.socket | None:
    """A socket listening on 127.0.0.1:``port`` with SO_REUSEADDR (as Milvus's own listener binds), or None when
    another socket listens there."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
        sock.listen()
    except OSError:
        sock.close()
        return None
    return sock


def _check_port(port: int) -> None:
    """Raise ValueError naming ``port`` and the fix when it is outside 1..65535 or another process listens there."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ValueError(f"port {port!r} is not a TCP port; pass 1..65535, or 0 for a free one")
    probe = _bind_beside_closing_connections(port)
    if probe is None:
        raise ValueError(
            f"port {port} on 127.0.0.1 is taken (another Milvus, or another server); pass a free one with "
            "--port, or --port 0 to let crl choose"
        )
    probe.close()


def _read_record(folder: Path) -> ServerRecord | None:
    """The record in ``folder``, or None when there is none."""
    path = folder / RECORD_FILE
    if not path.is_file():
        return None
    try:
        fields = json.loads(path.read_text(encoding="utf-8"))
        fields["etcd_ports"] = tuple(fields["etcd_ports"])
        return ServerRecord(**fields)
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{path} is not a record crl milvus start wrote ({error}); stop the server by its pid, then delete "
            "the file"
        ) from None


def _is_server(record: ServerRecord) -> bool:
    """Whether ``record.pid`` is still the Milvus binary of ``record.folder`` (not a process that took its pid)."""
    try:
        command = Path(f"/proc/{record.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(command) and command[0] == str(Path(record.folder) / "bin" / "milvus").encode()


def _healthy(metrics_port: int) -> bool:
    """Whether the server's health endpoint on 127.0.0.1 (``GET /healthz`` on its metrics port) answers OK: one
    HTTP/1.0 request over a loopback socket, which cannot reach beyond this machine."""
    request = f"GET /healthz HTTP/1.0\r\nHost: {LOOPBACK}\r\n\r\n".encode("ascii")
    try:
        with socket.create_connection((LOOPBACK, metrics_port), timeout=2) as connection:
            connection.sendall(request)
            answer = b""
            while chunk := connection.recv(4096):
                answer += chunk
    except OSError:
        return False
    head, _, body = answer.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    return len(status) >= 2 and status[0].startswith(b"HTTP/") and status[1] == b"200" and b"OK" in body


def _log_tail(folder: Path, lines: int = 3) -> str:
    """What the server's stderr log says went wrong: its first ``lines`` lines that name a panic, a fatal error
    or an error, else its last ``lines`` lines, joined by ' | '."""
    log = folder / "logs" / "milvus-stderr.log"
    if not log.is_file():
        return "(no log)"
    kept = [line.strip()[:300] for line in log.read_text(errors="replace").splitlines() if line.strip()]
    failures = [
        line
        for line in kept
        if re.search(r"panic|fatal|\"level\":\"error\"|\[error\]", line, flags=re.IGNORECASE)
    ]
    return " | ".join(failures[:lines] or kept[-lines:]) or "(empty log)"


def start_detached(folder: str | Path, *, port: int = 19530, timeout_s: float = 120.0) -> ServerRecord:
    """Start a server in ``folder`` that outlives this process (its own session), wait until it answers, and
    record it in ``folder/RECORD_FILE``; ``port`` is its client port (0: a free one).

    Raises:
        ValueError: when a server recorded in ``folder`` still runs, or ``port`` is taken or not a port (naming
            it and the fix).
        MilvusStartError: when the server stops while starting, or does not answer within ``timeout_s`` (then
            it is stopped, as on an interrupt); the message names its log.
    """
    base = Path(folder).resolve()
    running = server_status(base)
    if running is not None:
        raise ValueError(
            f"a Milvus server already runs from {base} (pid {running.pid}, milvus://{running.address}); use it, "
            f"or stop it first: crl milvus stop --dir {folder}"
        )
    chosen = free_port() if port == 0 else port
    _check_port(chosen)
    base.mkdir(parents=True, exist_ok=True)
    etcd_ports = (free_port(), free_port())
    server = local_server(base, port=chosen, exact_port=True, etcd_ports=etcd_ports)
    process, metrics_port = _launch(server, base)
    try:
        _wait_until_healthy(process, metrics_port, base, timeout_s)
    except BaseException:
        _terminate(process.pid)
        raise
    record = ServerRecord(
        process.pid,
        chosen,
        metrics_port,
        etcd_ports,
        str(base),
        datetime.now(UTC).isoformat(timespec="seconds"),
    )
    (base / RECORD_FILE).write_text(json.dumps(asdict(record), indent=2), encoding="utf-8")
    return record


def _wait_until_healthy(
    process: subprocess.Popen[bytes], metrics_port: int, base: Path, timeout_s: float
) -> None:
    """Return once the server answers on ``metrics_port``; a :class:`MilvusStartError` quoting its log when its
    process stops first or ``timeout_s`` pass (the caller stops it then, as on an interrupt)."""
    deadline = time.monotonic() + timeout_s
    while not _healthy(metrics_port):
        if process.poll() is not None:
            raise MilvusStartError(
                f"the Milvus server stopped while starting (exit status {process.returncode}); its log "
                f"{base / 'logs' / 'milvus-stderr.log'} ends: {_log_tail(base)}"
            )
        if time.monotonic() > deadline:
            raise MilvusStartError(
                f"the Milvus server did not answer within {timeout_s:.0f} s and was stopped; its log "
                f"{base / 'logs' / 'milvus-stderr.log'} ends: {_log_tail(base)}"
            )
        time.sleep(0.2)


def _launch(server: Any, base: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Write ``server``'s config and start its binary in a session of its own (so it outlives this process and
    its terminal), logging to ``base/logs``; returns the process and its metrics port."""
    # the milvus package is the optional extra crl[milvus]; its unpacking of the binary has no public name
    from milvus import _initialize_data_files

    server.config.resolve()
    _initialize_data_files(str(base))
    metrics_port, probe = server.config.resolve_port(METRICS_PORT)
    probe.close()
    binary = base / "bin" / "milvus"
    library_path = ":".join(filter(None, [str(binary.parent), os.environ.get("LD_LIBRARY_PATH", "")]))
    environment = {
        **os.environ,
        "DEPLOY_MODE": "STANDALONE",
        "METRICS_PORT": str(metrics_port),
        "MILVUS_RUN_DIR": str(base / "run"),
        "LD_LIBRARY_PATH": library_path,
    }
    logs = base / "logs"
    with (
        open(logs / "milvus-stdout.log", "wb") as out,
        open(logs / "milvus-stderr.log", "wb") as err,
    ):
        process = subprocess.Popen(
            [str(binary), "run", "standalone"],
            cwd=base,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    return process, int(metrics_port)


def server_status(folder: str | Path) -> ServerRecord | None:
    """The record of the server started from ``folder`` while its process runs; None when none runs (a record
    whose process is gone is removed)."""
    base = Path(folder).resolve()
    record = _read_record(base)
    if record is None:
        return None
    if _is_server(record):
        return record
    (base / RECORD_FILE).unlink(missing_ok=True)
    return None


def stop_detached(folder: str | Path, *, timeout_s: float = 10.0) -> ServerRecord | None:
    """Stop the server started from ``folder`` (SIGTERM, SIGKILL after ``timeout_s``: Milvus's graceful stop
    waits for its connected clients, and writes it acknowledged survive a kill) and remove its record; returns
    the record, or None when no server runs from there."""
    record = server_status(folder)
    if record is None:
        return None
    _terminate(record.pid, timeout_s)
    (Path(record.folder) / RECORD_FILE).unlink(missing_ok=True)
    return record


def _terminate(pid: int, timeout_s: float = 30.0) -> None:
    """SIGTERM ``pid``, then SIGKILL when it still runs after ``timeout_s``; returns once it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (reaping it when it is this process's child)."""
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat")
    return not (state.is_file() and state.read_text().rsplit(")", 1)[-1].split()[0] == "Z")
