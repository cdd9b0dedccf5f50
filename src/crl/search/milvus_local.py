"""The packaged Milvus standalone server on this machine (the ``milvus`` package's binary, the extra crl[milvus]).

:class:`LocalServer` (``local_server(folder, port=...)``) is a server kept alive by the calling process (tests,
benchmarks): ``start()``, ``stop()``, ``server_proc``. :func:`start_detached` starts one that outlives its
caller, records its process and ports in its folder (:data:`RECORD_FILE`), and :func:`stop_detached` /
:func:`server_status` find it there again: ``crl milvus start|stop|status --dir D``.

Where it listens. Milvus 2.3.5's gRPC servers (proxy, coordinators, nodes) and its metrics port listen on
``:PORT``, every interface, whatever its config says, and its internal ports answer without a password (one
empty call to the root coordinator ended a whole server). So crl runs the binary and its embedded etcd in a
network namespace of their own (:mod:`crl.search.milvus_sandbox`: ``unshare(CLONE_NEWNET)``, in an unprivileged
user namespace when not root), whose only interface is its own loopback, and publishes two ports on the host's
127.0.0.1, forwarded into it: the client (proxy) port and the metrics/health port. Nothing else of the server
is reachable, from this machine or another. crl never enables Milvus's authorization: any local user who can
reach 127.0.0.1 reaches the client port, without a password. Where the kernel refuses a namespace, a start
fails naming the reason, unless ``exposed=True`` (``crl milvus start --exposed``) runs it in the host's network
namespace, every port on every interface, each one recorded and printed.

Lifetime. The binary dies with the sandbox, and the sandbox with its starter until the server answered: a
starter killed at any moment leaves nothing running. One start at a time per folder: the folder's lock
(:data:`LOCK_FILE`) is held by the starter, then by the sandbox and the binary while they run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crl.search.milvus_sandbox import DETACH

__all__ = [
    "LOCK_FILE",
    "LOOPBACK",
    "RECORD_FILE",
    "SANDBOX",
    "LocalServer",
    "MilvusStartError",
    "ServerRecord",
    "exposure_note",
    "isolation_error",
    "local_server",
    "server_status",
    "start_detached",
    "stop_detached",
]

LOOPBACK = "127.0.0.1"
"""The address the published ports listen on, and every component advertises."""

RECORD_FILE = "crl-milvus.json"
"""The file in a server's folder naming its process and ports (:class:`ServerRecord`)."""

LOCK_FILE = "crl-milvus.lock"
"""The file in a server's folder whose lock one start, then its running server, holds."""

ETCD_FILE = "embed-etcd.yaml"
"""The embedded etcd's own config (in the folder's ``configs``): its client and peer URLs on 127.0.0.1."""

ETCD_PORTS = (2379, 2380)
"""The embedded etcd's client and peer ports inside the server's namespace (etcd's own defaults)."""

SANDBOX = Path(__file__).with_name("milvus_sandbox.py")
"""The script run between crl and the binary (:mod:`crl.search.milvus_sandbox`)."""

NO_AUTHORIZATION = (
    "crl enables no Milvus authorization: any local user can use the client port without a password"
)


class MilvusStartError(OSError):
    """The server did not come up: its process stopped, or it did not answer in time (the message names its
    log)."""


@dataclass(frozen=True)
class ServerRecord:
    """A detached server as :func:`start_detached` records it in ``folder/RECORD_FILE``.

    Attributes:
        pid: the sandbox's process (:mod:`crl.search.milvus_sandbox`), which the Milvus binary runs under.
        port: its client (proxy) port: ``milvus://127.0.0.1:PORT/COLLECTION``.
        metrics_port: its health endpoint, ``http://127.0.0.1:METRICS_PORT/healthz``.
        folder: where it keeps its data, logs and config.
        started: when it was launched (UTC, ISO 8601).
        ready: whether it answered (False while it starts).
        isolated: whether it runs in a network namespace of its own (else ``--exposed``).
        listening: every TCP port its processes listen on as the host sees them: the two published ones on
            127.0.0.1 when isolated, every port of the server on every interface when exposed (filled once
            ready).
        namespace_ports: the ports it listens on inside its namespace, reachable from nowhere else (empty
            when exposed).
    """

    pid: int
    port: int
    metrics_port: int
    folder: str
    started: str
    ready: bool
    isolated: bool
    listening: tuple[int, ...] = ()
    namespace_ports: tuple[int, ...] = ()

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, the host and port of a collection's address."""
        return f"{LOOPBACK}:{self.port}"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the system's choice)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def isolation_error() -> str | None:
    """Why the server cannot run in a network namespace here (the kernel's refusal), or None when it can: the
    sandbox tries one in a process of its own."""
    probe = subprocess.run(
        [sys.executable, "-I", str(SANDBOX), "--probe"], capture_output=True, text=True, check=False
    )
    if probe.returncode == 0:
        return None
    return probe.stderr.strip().split("network namespace: ", 1)[-1] or f"exit status {probe.returncode}"


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


def _milvus_package() -> Any:
    """The ``milvus`` package (the extra crl[milvus]).

    Raises:
        ValueError: when it is not installed, naming the fix.
    """
    try:
        # the milvus package is the optional extra crl[milvus]: loaded where a local server is wanted
        import milvus
    except ImportError:
        raise ValueError(
            "the local Milvus server is the milvus package of the extra crl[milvus], not installed here; "
            "pip install 'crl[milvus]'"
        ) from None
    return milvus


def _check_port(port: int) -> None:
    """Raise ValueError naming ``port`` and the fix unless it is 0 (a free one) or a TCP port."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port {port!r} is not a TCP port; pass 1..65535, or 0 for a free one")


def _check_timeout(timeout_s: float) -> None:
    """Raise ValueError naming ``timeout_s`` and the fix unless it is a positive number of seconds."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s < math.inf:
        raise ValueError(
            f"timeout {timeout_s!r} is not a number of seconds > 0; pass how long to wait for the server, "
            "e.g. --timeout 120"
        )


def _listener(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:``port`` (0: a free one) with SO_REUSEADDR, so a restart binds beside a
    killed server's closing connections.

    Raises:
        ValueError: naming the port and the fix when another socket listens there.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise ValueError(
            f"port {port} on 127.0.0.1 is taken (another Milvus, or another server); pass a free one with "
            "--port, or --port 0 to let crl choose"
        ) from None
    return sock


def _check_free_everywhere(port: int) -> None:
    """Raise ValueError naming ``port`` and the fix when a socket listens at it on any address of this machine
    (an exposed Milvus binds ``[::]:PORT``, and moves its proxy to a random port when that fails).
    """
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        try:
            probe.bind(("::", port))
            probe.listen()
        except OSError:
            raise ValueError(
                f"port {port} is taken on an address of this machine (127.0.0.1, [::1] or another); an exposed "
                "Milvus listens on every address: pass a free one with --port, or --port 0 to let crl choose"
            ) from None


def _lock(folder: Path, wait_s: float) -> int:
    """A descriptor holding the exclusive lock of ``folder/LOCK_FILE``, waiting at most ``wait_s`` seconds.

    Raises:
        ValueError: when another start, or the server it started, holds it still.
    """
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise ValueError(
                    f"another crl milvus start, or the server it started, holds {folder} now; wait for it "
                    f"(crl milvus status --dir {folder}), or stop it"
                ) from None
            time.sleep(0.1)


class LocalServer:
    """A Milvus standalone server keeping its data in ``folder``, its client port published on 127.0.0.1, run in
    a network namespace of its own by crl's sandbox (the module's docstring); not started yet: ``start()``
    (about 10 s), ``stop()``. It dies with the process that started it unless ``detach()``-ed.

    Attributes:
        folder: its data, logs and config.
        listen_port: the client port (0 until the first start when asked for a free one).
        metrics_port: the health endpoint's port (chosen at the first start, kept across restarts).
        server_proc: the sandbox's process while it runs, else None.
    """

    def __init__(
        self, folder: str | Path, *, port: int = 19530, session_ttl_s: int = 30, exposed: bool = False
    ) -> None:
        """Check the arguments; ``session_ttl_s`` is the lease of the server's session (Milvus's default 30 s: a
        restart after a crash waits for the dead session's lease); ``exposed``: the module's docstring.

        Raises:
            ValueError: when the milvus package is missing, or ``port`` is not a port, naming the fix.
        """
        _milvus_package()
        _check_port(port)
        self.folder = Path(folder).resolve()
        self.listen_port = port
        self.metrics_port = 0
        self.exposed = exposed
        self.session_ttl_s = session_ttl_s
        self.server_proc: subprocess.Popen[bytes] | None = None

    @property
    def binary_pid(self) -> int | None:
        """The Milvus binary's process (the sandbox's child), or None when none runs."""
        if self.server_proc is None:
            return None
        children = _children(self.server_proc.pid)
        return children[0] if children else None

    def launch(self, lock_wait_s: float = 10.0) -> subprocess.Popen[bytes]:
        """Lock the folder, write the config and start the sandbox and binary, without waiting for an answer;
        returns the sandbox's process.

        Raises:
            ValueError: when another start holds the folder, a port is taken, or (unless exposed) no network
                namespace can be made here, naming the reason and the fix.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        lock = _lock(self.folder, lock_wait_s)
        try:
            if not self.exposed:
                refused = isolation_error()
                if refused is not None:
                    raise ValueError(
                        f"cannot run the Milvus server in a network namespace of its own here ({refused}); "
                        "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), or "
                        "pass exposed=True (crl milvus start --exposed) to run it with every port on every "
                        "interface, without a password"
                    )
                return self._launch_isolated(lock)
            return self._launch_exposed(lock)
        finally:
            os.close(lock)

    def _launch_isolated(self, lock: int) -> subprocess.Popen[bytes]:
        """Bind the client and health ports on the host's 127.0.0.1, write a config whose other ports are the
        package's defaults (free in an empty namespace), and start the sandbox forwarding both into it."""
        client, metrics = _listener(self.listen_port), _listener(self.metrics_port)
        try:
            self.listen_port, self.metrics_port = client.getsockname()[1], metrics.getsockname()[1]
            config = self._config(ETCD_PORTS)
            config.resolve_storage()
            config.write_config()
            forwards = [f"--forward={s.fileno()}:{s.getsockname()[1]}" for s in (client, metrics)]
            return self._spawn(forwards, (client.fileno(), metrics.fileno(), lock), lock)
        finally:
            client.close()
            metrics.close()

    def _launch_exposed(self, lock: int) -> subprocess.Popen[bytes]:
        """Check the client port is free on every address, let the package pick free ports for the rest on the
        host, and start the sandbox in the host's namespace."""
        self.listen_port = self.listen_port or free_port()
        _check_free_everywhere(self.listen_port)
        self.metrics_port = self.metrics_port or free_port()
        config = self._config((free_port(), free_port()))
        config.try_bind_port = _bound_or_none
        try:
            config.resolve()
        except RuntimeError as error:
            raise ValueError(f"{error}; pass another --port, or --port 0 to let crl choose") from None
        return self._spawn(["--exposed"], (lock,), lock)

    def _config(self, etcd_ports: tuple[int, int]) -> Any:
        """The package's config of this server: data in the folder, etcd at ``etcd_ports`` on 127.0.0.1, the
        client port, the session lease."""
        config = _milvus_package().MilvusServerConfig()
        config.configs["data_dir"] = str(self.folder)
        config.resolve_storage()
        config.template_text = _loopback_template(
            config.template_text, _etcd_config(self.folder, *etcd_ports)
        )
        config.update(etcd_port=etcd_ports[0], proxy_port=self.listen_port)
        config.set("etcd_port", etcd_ports[0])
        config.set("proxy_port", self.listen_port)
        config.set("common.session.ttl", self.session_ttl_s)
        return config

    def _spawn(
        self, sandbox_arguments: list[str], inherited: tuple[int, ...], lock: int
    ) -> subprocess.Popen[bytes]:
        """Unpack the binary and start the sandbox running it, its output in the folder's logs; returns the
        sandbox's process (also :attr:`server_proc`)."""
        _milvus_package()._initialize_data_files(str(self.folder))
        binary = self.folder / "bin" / "milvus"
        library_path = ":".join(filter(None, [str(binary.parent), os.environ.get("LD_LIBRARY_PATH", "")]))
        environment = {
            **os.environ,
            "DEPLOY_MODE": "STANDALONE",
            "METRICS_PORT": str(self.metrics_port),
            "MILVUS_RUN_DIR": str(self.folder / "run"),
            "LD_LIBRARY_PATH": library_path,
        }
        logs = self.folder / "logs"
        logs.mkdir(exist_ok=True)
        command = [
            *_sandbox_prefix(self.folder),
            *sandbox_arguments,
            f"--lock={lock}",
            "--",
            str(binary),
            "run",
            "standalone",
        ]
        with (
            open(logs / "milvus-stdout.log", "wb") as out,
            open(logs / "milvus-stderr.log", "wb") as err,
        ):
            self.server_proc = subprocess.Popen(
                command,
                cwd=self.folder,
                env=environment,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                pass_fds=inherited,
                start_new_session=True,
            )
        return self.server_proc

    def wait_until_ready(self, timeout_s: float) -> None:
        """Return once the server answers on its metrics port; a :class:`MilvusStartError` quoting its log when
        its process stops first or ``timeout_s`` pass (it is stopped then)."""
        process = self.server_proc
        if process is None:
            raise MilvusStartError(f"the Milvus server of {self.folder} was not started; call start()")
        deadline = time.monotonic() + timeout_s
        log = self.folder / "logs" / "milvus-stderr.log"
        while not _healthy(self.metrics_port):
            if process.poll() is not None:
                raise MilvusStartError(
                    f"the Milvus server stopped while starting (exit status {process.returncode}); its log "
                    f"{log} ends: {_log_tail(self.folder)}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise MilvusStartError(
                    f"the Milvus server did not answer within {timeout_s:g} s and was stopped; its log {log} "
                    f"ends: {_log_tail(self.folder)}"
                )
            time.sleep(0.2)

    def start(self, timeout_s: float = 180.0, lock_wait_s: float = 10.0) -> None:
        """Start the server and wait until it answers (it stops when this call fails or is interrupted).

        Raises:
            ValueError: as :meth:`launch`.
            MilvusStartError: as :meth:`wait_until_ready`.
        """
        _check_timeout(timeout_s)
        self.launch(lock_wait_s)
        try:
            self.wait_until_ready(timeout_s)
        except BaseException:
            self.stop()
            raise

    def detach(self) -> None:
        """Let the started server outlive this process (it dies with it until then)."""
        if self.server_proc is not None and self.server_proc.stdin is not None:
            self.server_proc.stdin.write(DETACH)
            self.server_proc.stdin.close()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the server (SIGTERM: Milvus's graceful stop; SIGKILL after ``timeout_s``) and wait until its
        processes are gone."""
        if self.server_proc is None:
            return
        _terminate(self.server_proc.pid, timeout_s)
        if self.server_proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.server_proc.stdin.close()
        self.server_proc = None


def local_server(
    folder: str | Path, *, port: int = 19530, session_ttl_s: int = 30, exposed: bool = False
) -> LocalServer:
    """A :class:`LocalServer` in ``folder`` with its client port at ``port`` (0: a free one), not started yet.

    Raises:
        ValueError: when the milvus package (the extra crl[milvus]) is not installed, naming the fix.
    """
    return LocalServer(folder, port=port, session_ttl_s=session_ttl_s, exposed=exposed)


def _bound_or_none(port: int) -> socket.socket | None:
    """The package's port probe, binding beside a killed server's closing connections (SO_REUSEADDR)."""
    try:
        return _listener(port)
    except ValueError:
        return None


def _sandbox_prefix(folder: Path) -> list[str]:
    """The sandbox's command up to and including its folder (what :func:`_is_server` looks for)."""
    return [sys.executable, "-I", str(SANDBOX), "--dir", str(folder)]


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, oldest first."""
    found: list[tuple[int, int]] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append((int(fields[19]), int(stat.parent.name)))
    return [child for _, child in sorted(found)]


def _tree(pid: int) -> list[int]:
    """``pid`` and every process under it."""
    tree, queue = [], [pid]
    while queue:
        current = queue.pop()
        tree.append(current)
        queue.extend(_children(current))
    return tree


def _socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process ``pid`` holds open."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return inodes


def _listening_ports(pid: int, own_only: bool) -> tuple[int, ...]:
    """The TCP ports listened on in process ``pid``'s network namespace: by the sockets of ``pid``'s tree
    when ``own_only``, else by any socket of it; ascending."""
    owned = set().union(*(_socket_inodes(member) for member in _tree(pid))) if own_only else set()
    ports = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and (not own_only or int(fields[9]) in owned):
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return tuple(sorted(ports))


def _read_record(folder: Path) -> ServerRecord | None:
    """The record in ``folder``, or None when there is none."""
    path = folder / RECORD_FILE
    if not path.is_file():
        return None
    try:
        fields = json.loads(path.read_text(encoding="utf-8"))
        fields["listening"] = tuple(fields["listening"])
        fields["namespace_ports"] = tuple(fields["namespace_ports"])
        return ServerRecord(**fields)
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{path} is not a record crl milvus start wrote ({error}); stop the server by its pid, then delete "
            "the file"
        ) from None


def _write_record(record: ServerRecord) -> None:
    """Write ``record`` into its folder (replacing the file whole)."""
    path = Path(record.folder) / RECORD_FILE
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(asdict(record), indent=2), encoding="utf-8")
    partial.replace(path)


def _is_server(record: ServerRecord) -> bool:
    """Whether ``record.pid`` is still the sandbox of ``record.folder`` (not a process that took its pid)."""
    try:
        command = Path(f"/proc/{record.pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    return (
        len(command) > 4
        and Path(command[2]).name == SANDBOX.name
        and command[3:5] == ["--dir", record.folder]
        and _alive(record.pid)
    )


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
        if re.search(r"panic|fatal|\"level\":\"error\"|\[error\]|: error:", line, flags=re.IGNORECASE)
    ]
    return " | ".join(failures[:lines] or kept[-lines:]) or "(empty log)"


def start_detached(
    folder: str | Path, *, port: int = 19530, timeout_s: float = 120.0, exposed: bool = False
) -> ServerRecord:
    """Start a server in ``folder`` that outlives this process, record it in ``folder/RECORD_FILE`` (at once,
    then again when it answers: :class:`ServerRecord`), and return once it answers; ``port`` is its client port
    (0: a free one). Until it answers it dies with this process.

    Raises:
        ValueError: when a server recorded in ``folder`` still runs, another start holds the folder, ``port``
            is taken or not a port, ``timeout_s`` is not positive, or no network namespace can be made (unless
            ``exposed``), naming it and the fix.
        MilvusStartError: when the server stops while starting, or does not answer within ``timeout_s`` (then
            it is stopped, as on an interrupt); the message names its log.
    """
    _check_timeout(timeout_s)
    base = Path(folder).resolve()
    running = server_status(base)
    if running is not None:
        raise ValueError(
            f"a Milvus server already runs from {base} (pid {running.pid}, milvus://{running.address}); use it, "
            f"or stop it first: crl milvus stop --dir {folder}"
        )
    server = LocalServer(base, port=port, exposed=exposed)
    sandbox = server.launch(lock_wait_s=0.0)
    launched = datetime.now(UTC).isoformat(timespec="seconds")
    record = ServerRecord(
        sandbox.pid, server.listen_port, server.metrics_port, str(base), launched, False, not exposed
    )
    try:
        _write_record(record)
        server.wait_until_ready(timeout_s)
        record = _ready(record, server)
        _write_record(record)
    except BaseException:
        server.stop()
        (base / RECORD_FILE).unlink(missing_ok=True)
        raise
    server.detach()
    return record


def _ready(record: ServerRecord, server: LocalServer) -> ServerRecord:
    """``record`` of a server that answers, with the ports it listens on.

    Raises:
        MilvusStartError: when an exposed server does not listen on its recorded client port (Milvus moves a
            proxy whose port is taken on another address to a random port).
    """
    binary = server.binary_pid
    if record.isolated:
        inside = _listening_ports(binary, own_only=False) if binary else ()
        return replace(
            record, ready=True, listening=(record.port, record.metrics_port), namespace_ports=inside
        )
    listening = _listening_ports(record.pid, own_only=True)
    if record.port not in listening:
        raise MilvusStartError(
            f"the Milvus server did not listen on its client port {record.port} (taken on another address, "
            f"such as [::1]:{record.port}?) and was stopped; pass another --port"
        )
    return replace(record, ready=True, listening=listening)


def exposure_note(record: ServerRecord) -> str:
    """What ``record``'s server exposes, said where it is started."""
    if record.isolated:
        return (
            f"Milvus runs in a network namespace of its own: only its client port {record.port} and health port "
            f"{record.metrics_port} are published, on 127.0.0.1; {NO_AUTHORIZATION}"
        )
    ports = ", ".join(map(str, record.listening))
    return (
        f"Milvus runs without a network namespace (--exposed): ports {ports} listen on this machine, all but "
        "its etcd's two on every interface, without a password; keep the firewall closed to them"
    )


def server_status(folder: str | Path) -> ServerRecord | None:
    """The record of the server started from ``folder`` while its process runs; None when none runs (a record
    whose process is gone, or one copied with the folder from another, naming that folder, is removed)."""
    base = Path(folder).resolve()
    record = _read_record(base)
    if record is None:
        return None
    if record.folder == str(base) and _is_server(record):
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
    """SIGTERM ``pid``, then SIGKILL its tree when it still runs after ``timeout_s``; returns once every process
    of its tree is gone."""
    tree = _tree(pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(_alive(member) for member in tree):
        if time.monotonic() > deadline:
            for member in tree:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(member, signal.SIGKILL)
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
