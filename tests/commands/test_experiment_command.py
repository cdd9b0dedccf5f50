"""``crl experiment``: a bad argument is one line naming the option and the fix, before anything is computed."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from crl.commands import app
from crl.commands._errors import EXIT_USAGE


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["fashion-mstar"], ["replaced by `crl experiment mstar --data fashion`"]),
        (["knee"], ["'knee' is not known", "mstar"]),
        (["mstar"], ["--data=''", "'wordnet', 'fashion'"]),
        (["mstar", "--data", "imagenet"], ["--data='imagenet'", "'wordnet', 'fashion'"]),
        (
            ["mstar", "--data", "fashion", "--fidelity", "huge"],
            ["--fidelity='huge'", "'tiny', 'reduced', 'full'"],
        ),
        (["mstar", "--data", "wordnet", "--seeds", "1"], ["--seeds 1 must be >= 2", "0 for the fidelity's"]),
        (["mstar", "--data", "wordnet", "--threads", "0"], ["--threads 0 must be >= 1"]),
        (
            ["mstar", "--data", "wordnet", "--fidelity", "full", "--n-max", "900"],
            ["--n-max 900 keeps 1 n", "2"],
        ),
        (["mstar", "--data", "wordnet", "--workers", "0"], ["workers", "1 runs the cells in this process"]),
        (["mstar", "--data", "wordnet", "--executor", "slurm"], ["--executor 'slurm'", "process, ray"]),
        (["mstar", "--data", "wordnet", "--report-only"], ["--report-only: no results store", "without"]),
    ],
)
def test_a_bad_argument_is_one_line_naming_it(args: list[str], needles: list[str], tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["experiment", *args, "--out", str(tmp_path / "out")])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == EXIT_USAGE, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for needle in needles:
        assert needle in result.output, result.output
    assert not (tmp_path / "out").exists()
