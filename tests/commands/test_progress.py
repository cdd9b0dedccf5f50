"""No silent waits: a long command's stages on stderr, as one line each off a terminal and as a progress display
on one (crl.commands._progress).

If these fail, a text command sits silent for the seconds (7-14 s) it loads its model, or its stage lines mix
into its output, or a terminal shows no progress.
"""

import io
import logging
from pathlib import Path

import numpy as np
import torch
from rich.console import Console
from typer.testing import CliRunner

from crl.commands import app
from crl.commands._progress import announce_import, stages_on_stderr
from crl.models.minilm import packaged_model_path
from crl.search import Index

LOG = logging.getLogger("crl.tests")


def _stages() -> None:
    """Two stages, the first counting three steps."""
    LOG.info("embedding %d texts", 3)
    for done in (1, 2, 3):
        LOG.info("embedded", extra={"progress": (done, 3)})
    LOG.info("ranking")


def test_off_a_terminal_each_stage_is_one_line_and_steps_are_silent() -> None:
    """A file or pipe gets one ``crl: stage`` line per stage and nothing per step."""
    written = io.StringIO()
    with stages_on_stderr(Console(file=written, force_terminal=False)):
        _stages()
    assert written.getvalue() == "crl: embedding 3 texts\ncrl: ranking\n"


def test_on_a_terminal_the_stages_show_as_a_progress_display_with_their_counts() -> None:
    """A terminal gets each stage with a bar counting its steps (3/3 once done), and the display ends with the
    block; no record reaches it afterwards."""
    written = io.StringIO()
    with stages_on_stderr(Console(file=written, force_terminal=True, width=100)):
        _stages()
    LOG.info("after the block")
    shown = written.getvalue()
    assert "embedding 3 texts" in shown and "3/3" in shown and "ranking" in shown
    assert "after the block" not in shown and "crl: " not in shown


def test_crl_embed_of_texts_names_its_stages_on_stderr(tmp_path: Path) -> None:
    """``crl embed minilm --text-file`` off a terminal: loading the model, embedding, one line each on stderr
    (torch is imported already here, so no import line); stdout holds only its result line."""
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"line number {i}\n" for i in range(70)))
    result = CliRunner().invoke(
        app, ["embed", "minilm", "--text-file", str(lines), "--out", str(tmp_path / "x.npy")]
    )
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"crl: loading the text model from {packaged_model_path()}",
        "crl: embedding 70 texts",
    ]
    assert result.stdout == f"embedded 70 texts into 384 dimensions: {tmp_path / 'x.npy'}\n"


def test_an_import_is_announced_only_while_it_is_ahead() -> None:
    """The seconds of a first import get a line; a module the process holds already gets none."""
    written = io.StringIO()
    with stages_on_stderr(Console(file=written, force_terminal=False)):
        announce_import("importing a module not loaded", "crl_no_such_module")
        announce_import("importing sys", "sys")
    assert written.getvalue() == "crl: importing a module not loaded\n"


TRAIN_CONFIG = """
[data]
source = "synthetic"
n_train = 64
dim = 3
batch_size = 16
[model]
encoder = "mlp"
embedding_dim = 4
hidden = []
[optim]
total_steps = 3
warmup_steps = 1
[run]
name = "tiny"
out_dir = "{out}"
log_every = 20
tensorboard = false
"""


def test_crl_train_off_a_terminal_says_each_stage_before_its_first_logged_step(tmp_path: Path) -> None:
    """``crl train ... | cat`` with log_every (20) above total_steps (3) once printed nothing until the end: each
    stage, the schedule of lines and the first step's time are one ``crl:`` line on stderr, in that order, and
    stdout still holds the progress line and the summary."""
    config = tmp_path / "tiny.toml"
    config.write_text(TRAIN_CONFIG.format(out=tmp_path / "runs"), encoding="utf-8")
    result = CliRunner().invoke(app, ["train", str(config)])
    assert result.exit_code == 0, result.output
    stages = [line.split(" (")[0] for line in result.stderr.splitlines()]
    assert stages[:3] == [
        "crl: reading the training pairs",
        "crl: building the mlp model on cpu",
        "crl: training steps 1-3 of 3",
    ]
    assert f"(torch threads: {torch.get_num_threads()})" in result.stderr
    assert stages[3].startswith("crl: step 1 of 3 took ") and len(stages) == 4, result.stderr
    assert "tiny step 3/3 loss" in result.stdout and "crl:" not in result.stdout


def test_a_display_that_is_not_live_shows_nothing_on_a_terminal() -> None:
    """crl train's own bar owns the terminal while it trains: its stage records must not open a second display
    (rich allows one live display at a time)."""
    written = io.StringIO()
    with stages_on_stderr(Console(file=written, force_terminal=True, width=100), live=False):
        _stages()
    assert written.getvalue() == ""


def test_crl_index_export_names_its_stages_off_a_terminal(tmp_path: Path) -> None:
    """``crl index export`` was silent for the 10 s of its imports, its copy and the collection's index: each
    stage is a ``crl:`` line on stderr before the result; an address that is not Milvus's stops it after the
    index is read, before any copy is announced."""
    Index.build(np.ones((20, 4), dtype=np.float32)).save(tmp_path / "idx")
    result = CliRunner().invoke(app, ["index", "export", str(tmp_path / "idx"), "--to", "milvus://bad"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[0] == f"crl: loading the index {tmp_path / 'idx'}"
    assert "is not a Milvus address" in result.stderr and "copying" not in result.stderr
