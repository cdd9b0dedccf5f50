"""``crl embed minilm --text ... --out x.npy``: the packaged MiniLM from the command line, and its errors."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from crl.commands import app
from crl.models.minilm import MiniLM, embed_texts
from tests.text.helpers import CORPUS, build_text_index


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    return MiniLM()


def test_embed_minilm_texts_equals_the_library(tmp_path: Path, minilm: MiniLM) -> None:
    out, lines = tmp_path / "x.npy", tmp_path / "lines.txt"
    lines.write_text("a dog\n\nthe sea\n", encoding="utf-8")
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
