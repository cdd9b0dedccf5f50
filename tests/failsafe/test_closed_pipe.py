"""A command whose reader closes the output pipe, as ``crl search ... | head`` does.

If this fails, the command prints "error: [Errno 32] Broken pipe" (or Python's "Exception ignored ... BrokenPipeError")
on the terminal and exits 2, as if the user had made a mistake, where other command-line tools end quietly.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import crl
from crl.commands._errors import EXIT_PIPE_CLOSED
from crl.search import Index


def test_crl_search_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """30 KB of results into a pipe whose reader is gone: no message, SIGPIPE's status (141)."""
    vectors = np.random.default_rng(0).standard_normal((60, 8)).astype(np.float32)
    folder = Index.build(vectors, metadata=[{"text": f"item {i}"} for i in range(60)]).save(tmp_path / "ix")
    source = str(Path(crl.__file__).resolve().parents[1])
    command = [sys.executable, "-m", "crl", "search", str(folder), *map(str, range(10)), "-k", "50", "--json"]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": source},
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    errors = process.stderr.read().decode()
    assert process.wait(timeout=120) == EXIT_PIPE_CLOSED == 141, errors
    assert errors == ""
