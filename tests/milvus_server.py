"""A real Milvus standalone server on 127.0.0.1 for the tests (the `milvus` package's binary), one per session.

tests/conftest.py's ``milvus_server`` fixture starts it on first use in a temporary folder and stops it at the end
of the session; outside CI a test using it skips, with the reason, where crl[milvus] is missing or the server
cannot start.
"""

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from crl.search.milvus import local_server

SESSION_TTL_S = 3
"""The server's session lease (Milvus's default 30 s): a restart after a kill waits for the dead session's lease."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_or_skip(base: Path) -> Any:
    """A started Milvus server in ``base`` on free ports; a skip (outside CI) where that is impossible."""
    try:
        server = local_server(base, port=free_port(), session_ttl_s=SESSION_TTL_S)
        server.webservice_port = free_port()
        server.start()
    except (
        Exception
    ) as error:  # the server's own start raises many kinds; CI turns any of them into a failure
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no Milvus server here ({type(error).__name__}: {error}); install crl[milvus]")
    return server


def uri(server: Any, name: str) -> str:
    """The address of collection ``name`` on ``server``."""
    return f"milvus://127.0.0.1:{server.listen_port}/{name}"


def kill(server: Any) -> None:
    """Kill the server's process (SIGKILL: no shutdown, nothing flushed) and wait for it; ``server.start()``
    starts it again on the same port and folder."""
    server.server_proc.kill()
    server.server_proc.wait()
