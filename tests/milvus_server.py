"""A real Milvus standalone server on 127.0.0.1 for the tests (the `milvus` package's binary, in crl's network
namespace: crl.search.milvus_local), one per session, and what the host sees of a server's sockets.

tests/conftest.py's ``milvus_server`` fixture starts it on first use in a temporary folder and stops it at the end
of the session; outside CI a test using it skips, with the reason, where crl[milvus] is missing or the server
cannot start (a kernel that refuses network namespaces included).
"""

import ipaddress
import itertools
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from crl.search.milvus_local import local_server

SESSION_TTL_S = 3
"""The server's session lease (Milvus's default 30 s): a restart after a kill waits for the dead session's lease."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_or_skip(base: Path) -> Any:
    """A started Milvus server in ``base`` on free ports; a skip (outside CI) where that is impossible, saying
    why: the extra crl[milvus] is not installed, or the server did not start (its error)."""
    try:
        # the milvus package is the extra crl[milvus]: a test without it is skipped, not failed, outside CI
        import milvus  # noqa: F401
    except ImportError as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"the milvus package is not installed ({error}); pip install 'crl[milvus]'")
    try:
        server = local_server(base, port=free_port(), session_ttl_s=SESSION_TTL_S)
        server.start()
    except (
        Exception
    ) as error:  # the server's own start raises many kinds; CI turns any of them into a failure
        if os.environ.get("CI"):
            raise
        pytest.skip(
            f"the Milvus server did not start ({type(error).__name__}: {error}); its log: {base}/logs"
        )
    return server


def listening(pid: int) -> list[str]:
    """The local addresses ``HOST:PORT`` of every TCP socket process ``pid`` listens on (``ss -ltnp``)."""
    table = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in table.splitlines() if f"pid={pid}," in line]


def uri(server: Any, name: str) -> str:
    """The address of collection ``name`` on ``server``."""
    return f"milvus://127.0.0.1:{server.listen_port}/{name}"


def kill(server: Any) -> None:
    """Kill the server's processes (SIGKILL: no shutdown, nothing flushed) and wait for them; ``server.start()``
    starts it again on the same port and folder."""
    tree = process_tree(server.server_proc.pid)
    server.server_proc.kill()
    server.server_proc.wait()
    for pid in tree:
        while _state(pid) not in ("", "Z"):
            time.sleep(0.05)


def _state(pid: int) -> str:
    """The one-letter state of process ``pid`` ("" when it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live process under it (read from each process's parent in /proc)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(parent, []).append(int(stat.parent.name))
    tree, queue = [], [pid]
    while queue:
        current = queue.pop()
        tree.append(current)
        queue.extend(parents.get(current, []))
    return tree


def _hex_address(text: str) -> str:
    """An address of /proc/net/tcp (little-endian hex words) as text."""
    raw = bytes.fromhex(text)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def listening_sockets(pid: int) -> list[tuple[str, int]]:
    """(address, port) of each TCP socket process ``pid`` holds that listens, read from the tables of its own
    network namespace (``/proc/PID/net/tcp``, ``tcp6``): what ``ss -ltnp`` shows from inside it."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                address, port = fields[1].rsplit(":", 1)
                found.append((_hex_address(address), int(port, 16)))
    return found


def namespace_addresses(pid: int) -> set[str]:
    """Every local address of process ``pid``'s network namespace: IPv4 from its routing trie's local host
    entries, IPv6 from its interfaces' address table."""
    found = set()
    trie = Path(f"/proc/{pid}/net/fib_trie").read_text().splitlines()
    for line, following in itertools.pairwise(trie):
        if following.strip() == "/32 host LOCAL":
            found.add(line.split()[-1])
    for line in Path(f"/proc/{pid}/net/if_inet6").read_text().splitlines():
        found.add(str(ipaddress.ip_address(bytes.fromhex(line.split()[0]))))
    return found


def answering_addresses(pid: int) -> list[str]:
    """``ADDRESS:PORT`` for every address on which a listening socket of ``pid`` answers: its own address, or,
    for one bound to every interface, each address of its namespace (IPv4 ones too for a dual-stack ``::``)."""
    local = namespace_addresses(pid)
    answering = []
    for address, port in listening_sockets(pid):
        if address == "0.0.0.0":
            reach = {a for a in local if ipaddress.ip_address(a).version == 4}
        elif address == "::":
            reach = local
        else:
            reach = {address}
        answering.extend(f"{a}:{port}" for a in sorted(reach))
    return answering
