"""The process between crl and the Milvus binary: it isolates the server in a network namespace of its own and
forwards the published ports from 127.0.0.1 into it (:mod:`crl.search.milvus_local` runs it; standard library
only, run as a script: ``python -I milvus_sandbox.py --dir D [--forward FD:PORT ...] [--exposed] -- BINARY ...``).

Isolation. The sandbox enters a new network namespace (``unshare(CLONE_NEWNET)``, with ``CLONE_NEWUSER`` when not
root: an unprivileged user namespace, as ``unshare --net --map-user`` makes), brings its loopback up and starts
the binary there: every port Milvus and its etcd listen on, ``:PORT`` included, is in a namespace whose only
interface is its own loopback, which no other machine and no other process of this one can reach. The listening
sockets it inherits (``--forward FD:PORT``: the proxy's and the metrics port, bound by crl on the host's
127.0.0.1 before the namespace exists) are the only way in: each connection accepted there is joined to
127.0.0.1:PORT inside. With ``--exposed`` it runs the binary in the host's namespace, forwarding nothing.

Lifetime. The binary dies with the sandbox (``PR_SET_PDEATHSIG``: SIGKILL), and the sandbox dies with its starter
until the starter detaches it: its standard input is the starter's pipe; ``detach`` then the pipe's end lets it
outlive the starter, while the end alone (the starter killed, or exiting before the server answered) stops the
binary. SIGTERM is passed on to the binary (Milvus's graceful stop); the sandbox exits with the binary's status.

``--probe`` only tries the namespace: exit status 0, or 1 with the reason on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import threading

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
PR_SET_PDEATHSIG = 1
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
IFREQ = struct.Struct("16sH22x")
"""``struct ifreq`` with its name and flags (40 bytes on Linux)."""

LOOPBACK = "127.0.0.1"
DETACH = b"detach"
"""What the starter writes on the sandbox's standard input to let it outlive the starter."""

CHUNK = 1 << 16
PREFIX = "crl-milvus-sandbox"
"""The prefix of every line the sandbox writes to the server's stderr log."""


LIBC = ctypes.CDLL(None, use_errno=True)
"""The C library (unshare, prctl), its calls setting errno."""


def enter_network_namespace() -> None:
    """Move this process into a new network namespace (and a user namespace mapping its own uid and gid, when it
    is not root) with its loopback up.

    Raises:
        OSError: when the kernel refuses (namespaces disabled, a seccomp filter, no user namespaces), with the
            call and its reason.
    """
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWNET if uid == 0 else CLONE_NEWNET | CLONE_NEWUSER
    if LIBC.unshare(flags) != 0:
        error = ctypes.get_errno()
        raise OSError(
            error, f"unshare(CLONE_NEWNET{'' if uid == 0 else '|CLONE_NEWUSER'}): {os.strerror(error)}"
        )
    if uid != 0:
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as mapping:
                mapping.write(text)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        _, flags_now = IFREQ.unpack(fcntl.ioctl(control, SIOCGIFFLAGS, IFREQ.pack(b"lo", 0)))
        fcntl.ioctl(control, SIOCSIFFLAGS, IFREQ.pack(b"lo", flags_now | IFF_UP))


def _dying_with(parent: int) -> None:
    """In the binary's child process before exec: SIGKILL it when the sandbox ``parent`` ends (at once, when it
    ended already)."""
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _pump(source: socket.socket, target: socket.socket) -> None:
    """Copy ``source`` to ``target`` until ``source`` ends, then end ``target``'s writing half."""
    with contextlib.suppress(OSError):
        while data := source.recv(CHUNK):
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


def _join(client: socket.socket, port: int) -> None:
    """Join an accepted ``client`` to 127.0.0.1:``port`` in this namespace, both ways, then close both."""
    try:
        inner = socket.create_connection((LOOPBACK, port), timeout=5)
    except OSError:
        client.close()
        return
    inner.settimeout(None)
    back = threading.Thread(target=_pump, args=(inner, client), daemon=True)
    back.start()
    _pump(client, inner)
    back.join()
    client.close()
    inner.close()


def _forward(listener: socket.socket, port: int) -> None:
    """Accept connections on ``listener`` (the host's 127.0.0.1) forever, each joined to ``port`` inside."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_join, args=(client, port), daemon=True).start()


def _watch_starter(binary: subprocess.Popen[bytes]) -> None:
    """Read standard input to its end; unless the starter wrote :data:`DETACH` first, kill ``binary`` (the
    starter ended before the server answered)."""
    said = sys.stdin.buffer.read()
    if said != DETACH:
        print(
            f"{PREFIX}: its starter ended before the server answered; stopping it",
            file=sys.stderr,
            flush=True,
        )
        binary.kill()


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="milvus_sandbox.py")
    parser.add_argument("--dir", help="the server's folder (named for the process list)")
    parser.add_argument("--forward", action="append", default=[], help="FD:PORT, a listener to forward")
    parser.add_argument(
        "--lock", type=int, help="the descriptor of the folder's lock, kept by the binary too"
    )
    parser.add_argument("--exposed", action="store_true", help="run in the host's network namespace")
    parser.add_argument("--probe", action="store_true", help="only try the namespace")
    parser.add_argument("command", nargs="*", help="the binary and its arguments")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """Run the sandbox (the module's docstring); returns the binary's exit status."""
    arguments = _arguments(argv)
    if not arguments.exposed:
        try:
            enter_network_namespace()
        except OSError as error:
            print(
                f"{PREFIX}: error: cannot isolate the server in a network namespace: {error}", file=sys.stderr
            )
            return 1
    if arguments.probe:
        return 0
    listeners = []
    for spec in arguments.forward:
        fd, port = (int(part) for part in spec.split(":"))
        listeners.append((socket.socket(fileno=fd), port))
    parent = os.getpid()
    binary = subprocess.Popen(
        arguments.command,
        preexec_fn=lambda: _dying_with(parent),
        pass_fds=() if arguments.lock is None else (arguments.lock,),
        stdin=subprocess.DEVNULL,
    )
    for listener, port in listeners:
        threading.Thread(target=_forward, args=(listener, port), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: binary.send_signal(signal.SIGTERM))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_starter, args=(binary,), daemon=True).start()
    status = binary.wait()
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
