"""The quick `crl verify` run that tests/verify/test_shipped_claims.py checks, started in the background.

The run takes several minutes of one core. When collection selects its test, tests/conftest.py starts it at
once, so it runs on the second core beside the rest of the suite; the test then waits for it.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

TEST_NAME = "test_quick_verify_gives_the_committed_verdicts_and_resumes"
TIMEOUT_S = 900


def command(out: Path) -> list[str]:
    """``crl verify --fidelity quick --out OUT`` (seed 0, the run tests/expected_quick_verdicts.json pins)."""
    return [sys.executable, "-m", "crl", "verify", "--fidelity", "quick", "--out", str(out)]


def environment() -> dict[str, str]:
    """This process's environment with one OpenMP thread (the run's cells are many small tensor operations)."""
    return {**os.environ, "OMP_NUM_THREADS": "1"}


@dataclass
class BackgroundVerify:
    """A quick verify run started in ``folder`` (its output in ``folder/verify``, its streams beside it)."""

    folder: Path
    process: subprocess.Popen[bytes]

    @property
    def out(self) -> Path:
        return self.folder / "verify"

    @classmethod
    def start(cls) -> "BackgroundVerify":
        folder = Path(tempfile.mkdtemp(prefix="crl-quick-verify-"))
        with (folder / "stdout").open("wb") as stdout, (folder / "stderr").open("wb") as stderr:
            process = subprocess.Popen(
                command(folder / "verify"), stdout=stdout, stderr=stderr, env=environment()
            )
        return cls(folder, process)

    def result(self) -> subprocess.CompletedProcess[str]:
        """The finished run (waiting at most :data:`TIMEOUT_S` more seconds for it)."""
        code = self.process.wait(timeout=TIMEOUT_S)
        streams = [(self.folder / name).read_text(errors="replace") for name in ("stdout", "stderr")]
        return subprocess.CompletedProcess(self.process.args, code, *streams)

    def stop(self) -> None:
        """End the run if it still runs, and remove its folder."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


RUN = pytest.StashKey[BackgroundVerify]()
