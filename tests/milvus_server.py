"""A real Milvus standalone server on 127.0.0.1 for the tests (the `milvus` package's binary), one per session.

tests/conftest.py's ``milvus_server`` fixture starts it on first use in a temporary folder and stops it at the end
of the session; outside CI a test using it skips, with the reason, where crl[milvus] is missing or the server
cannot start.
"""

import os
import socket
import subprocess
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
        server.webservice_port = free_port()
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
    """Kill the server's process (SIGKILL: no shutdown, nothing flushed) and wait for it; ``server.start()``
    starts it again on the same port and folder."""
    server.server_proc.kill()
    server.server_proc.wait()
