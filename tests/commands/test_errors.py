"""Every command turns an expected error into one clean line and exit status 2.

If these fail, a user who mistypes a path meets a long traceback from deep inside crl instead of the message
that names the path and the fix.
"""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from crl.commands import app
from crl.commands._errors import EXIT_USAGE, run_reporting_errors


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def _assert_clean(code: int, output: str, *needles: str) -> None:
    """Exit status 2 and one ``error:`` line; the ``crl:`` lines of the stages begun before it may precede it
    (crl.commands._progress: they say what the command was doing when it stopped)."""
    assert code == EXIT_USAGE, output
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.strip() and not line.startswith("crl: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    for needle in needles:
        assert needle in output, output


def test_eval_of_a_missing_path(tmp_path: Path) -> None:
    _assert_clean(*_invoke("eval", str(tmp_path / "nowhere")), "nowhere", "does not exist")


def test_eval_of_a_folder_without_checkpoint(tmp_path: Path) -> None:
    _assert_clean(*_invoke("eval", str(tmp_path)), "no complete checkpoint", "crl train")


def test_train_of_a_missing_config(tmp_path: Path) -> None:
    _assert_clean(*_invoke("train", str(tmp_path / "missing.toml")), "missing.toml", "does not exist")


def test_train_with_a_bad_data_root(tmp_path: Path) -> None:
    config = tmp_path / "bad_root.toml"
    config.write_text(
        f'[data]\nsource = "fashion_mnist"\nroot = "{tmp_path / "nope"}"\n[run]\nout_dir = "{tmp_path}"\n',
        encoding="utf-8",
    )
    _assert_clean(*_invoke("train", str(config)), "dataset-fashion-mnist", str(tmp_path / "nope"))


def test_verify_with_an_unknown_fidelity(tmp_path: Path) -> None:
    _assert_clean(*_invoke("verify", "--fidelity", "fast", "--out", str(tmp_path)), "fast", "quick")


def test_an_os_error_names_its_path(capsys: pytest.CaptureFixture[str]) -> None:
    def body() -> int:
        raise PermissionError(13, "Permission denied", "/root/secret")

    assert run_reporting_errors(body) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == "error: Permission denied: /root/secret"


def test_a_bug_keeps_its_traceback() -> None:
    def body() -> int:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        run_reporting_errors(body)


def test_traceback_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRL_TRACEBACK", "1")

    def body() -> int:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        run_reporting_errors(body)
