"""``crl embed minilm --text ... --out x.npy``: the packaged MiniLM from the command line, and its errors."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import Result
from typer.testing import CliRunner

from crl.commands import app
from crl.models.minilm import MiniLM, embed_texts, packaged_model_path
from tests.serving.helpers import CORPUS, build_text_index


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    return MiniLM()


def test_embed_minilm_texts_equals_the_library(tmp_path: Path, minilm: MiniLM) -> None:
    out, lines = tmp_path / "x.npy", tmp_path / "lines.txt"
    lines.write_text("a dog\nthe sea\n", encoding="utf-8")
    result = CliRunner().invoke(
        app,
        ["embed", "minilm", "--text", "a large body of water", "--text-file", str(lines), "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    vectors = torch.from_numpy(np.load(out))
    assert vectors.shape == (3, 384)
    torch.testing.assert_close(
        vectors, embed_texts(["a large body of water", "a dog", "the sea"], model=minilm)
    )


def test_embed_text_errors_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    empty = runner.invoke(app, ["embed", "minilm", "--text", " ", "--out", str(tmp_path / "x.npy")])
    assert empty.exit_code == 2 and "empty" in empty.output
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    no_weights = runner.invoke(
        app, ["embed", str(tmp_path / "model"), "--text", "a", "--out", str(tmp_path / "y.npy")]
    )
    assert no_weights.exit_code == 2 and "no weights" in no_weights.output
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9\n")
    bad = runner.invoke(
        app, ["embed", "minilm", "--text-file", str(tmp_path / "bad.txt"), "--out", str(tmp_path / "z.npy")]
    )
    assert bad.exit_code == 2 and "not UTF-8" in bad.output
    no_input = runner.invoke(app, ["embed", "minilm", "--out", str(tmp_path / "w.npy")])
    assert no_input.exit_code == 2 and "--text" in no_input.output
    (tmp_path / "blank.txt").write_text("a\n\nb\n")
    blank = runner.invoke(
        app, ["embed", "minilm", "--text-file", str(tmp_path / "blank.txt"), "--out", str(tmp_path / "v.npy")]
    )
    assert blank.exit_code == 2 and "blank.txt:2 is blank" in blank.output


def test_embed_help_says_a_blank_line_is_an_error() -> None:
    """The help once promised blank lines were skipped, while they are an error (skipping one would shift every
    later row against its line)."""
    shown = " ".join(CliRunner().invoke(app, ["embed", "--help"], env={"COLUMNS": "300"}).output.split())
    assert "blank line is an error" in shown and "skipped" not in shown


def test_index_build_and_search_text_with_minilm(tmp_path: Path, minilm: MiniLM) -> None:
    found = CliRunner().invoke(
        app, ["search", str(build_text_index(tmp_path)), "a large body of water", "-k", "4", "--json"]
    )
    assert found.exit_code == 0, found.output
    hits = json.loads(found.output.strip().splitlines()[-1])["results"]
    scores = (
        embed_texts(CORPUS, model=minilm) @ embed_texts(["a large body of water"], model=minilm).T
    ).squeeze(1)
    assert [hit["id"] for hit in hits] == scores.argsort(descending=True).tolist()
    assert hits[0]["metadata"] == {"text": CORPUS[int(scores.argmax())]}


def _text_run(folder: Path, towers: tuple[str, ...]) -> Path:
    """A text run folder as crl train leaves it: config.toml and the exported towers (here the packaged model)."""
    folder.mkdir()
    (folder / "config.toml").write_text('[model]\nencoder = "minilm"\n', encoding="utf-8")
    for tower in towers:
        (folder / tower).symlink_to(packaged_model_path(), target_is_directory=True)
    return folder


def _build_index(run: Path, tmp_path: Path) -> Result:
    """``crl index build RUN --text-file TMP/corpus.txt --out TMP/i``."""
    return CliRunner().invoke(
        app,
        [
            "index",
            "build",
            str(run),
            "--text-file",
            str(tmp_path / "corpus.txt"),
            "--out",
            str(tmp_path / "i"),
        ],
    )


def test_index_build_of_a_text_run_folder_uses_its_sentence_transformer(tmp_path: Path) -> None:
    """`crl index build RUN --text-file` took RUN for a model folder and failed with "no config.json"; it now
    embeds with RUN/sentence-transformer and records that folder, so text queries use the same model."""
    run = _text_run(tmp_path / "run", ("sentence-transformer",))
    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    built = _build_index(run, tmp_path)
    assert built.exit_code == 0, built.output
    manifest = json.loads((tmp_path / "i" / "manifest.json").read_text())
    assert manifest["encoder"]["checkpoint"] == str((run / "sentence-transformer").resolve())
    found = CliRunner().invoke(app, ["search", str(tmp_path / "i"), "water", "-k", "2", "--json"])
    assert found.exit_code == 0, found.output
    assert {hit["id"] for hit in json.loads(found.stdout)["results"]} == {0, 3}  # the two lines about the sea


@pytest.mark.parametrize(
    ("towers", "message"),
    [
        ((), "has no sentence-transformer/ folder: only a text run"),
        (("sentence-transformer", "sentence-transformer-positive"), "holds two text towers; pass one"),
    ],
)
def test_a_run_folder_without_one_text_model_says_where_it_would_be(
    tmp_path: Path, towers: tuple[str, ...], message: str
) -> None:
    run = _text_run(tmp_path / "run", towers)
    (tmp_path / "corpus.txt").write_text("the sea\n", encoding="utf-8")
    built = _build_index(run, tmp_path)
    assert (
        built.exit_code == 2 and message in built.output and str(run / "sentence-transformer") in built.output
    )
    assert len(built.output.strip().splitlines()) == 1
