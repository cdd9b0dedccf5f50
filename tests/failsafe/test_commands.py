"""``crl embed`` and ``crl index build`` on bad input: one line naming the option and the fix, exit status 2.

Each case ended in a traceback from torch, safetensors or the tokenizer before; none of them needs a trained run
(the checks come before the checkpoint is read) or the MiniLM weights (only its config is read).
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from crl.commands import app


def _one_line_error(args: list[str]) -> str:
    """Run crl with ``args``; assert exit status 2 and a single ``error:`` line, and return that line."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def _strings(tmp_path: Path) -> Path:
    folder = tmp_path / "strings"
    folder.mkdir()
    np.save(folder / "x.npy", np.array(["a dog", "the sea"]))
    return folder


def test_embed_an_array_of_strings(tmp_path: Path) -> None:
    """Was TypeError: can't convert np.ndarray of type numpy.str_ (torch.from_numpy)."""
    line = _one_line_error(
        ["embed", str(tmp_path / "run"), "--data", str(_strings(tmp_path)), "--out", str(tmp_path / "v.npy")]
    )
    assert "--key 'x': the array holds strings (<U7), not real numbers" in line and "--text-file" in line


def test_index_build_on_an_array_of_strings(tmp_path: Path) -> None:
    """Was the same TypeError from torch.from_numpy."""
    line = _one_line_error(
        [
            "index",
            "build",
            str(tmp_path / "run"),
            "--data",
            str(_strings(tmp_path)),
            "--out",
            str(tmp_path / "i"),
        ]
    )
    assert "--key 'x': the array holds strings (<U7), not real numbers" in line and "--text-file" in line


def test_embed_with_a_truncated_model_safetensors(tmp_path: Path) -> None:
    """Was safetensors' SafetensorError: incomplete metadata, file not fully covered (from transformers)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_type": "bert", "hidden_size": 8}), encoding="utf-8"
    )
    weights = folder / "model.safetensors"
    save_file({"embeddings.word_embeddings.weight": torch.zeros(32, 8)}, str(weights))
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    line = _one_line_error(["embed", str(folder), "--text", "a dog", "--out", str(tmp_path / "v.npy")])
    assert f"model folder '{folder}': its model.safetensors is damaged" in line and "copy the model" in line


@pytest.mark.parametrize("length", ["-3", "0", "1", "100000"])
def test_embed_max_seq_length_outside_2_to_the_models_positions(tmp_path: Path, length: str) -> None:
    """-3 was an OverflowError of the tokenizer, 0 and 1 were ignored (a long text then crashed the model, as
    100000 did: expanded size 602 against 512 positions)."""
    line = _one_line_error(
        ["embed", "minilm", "--text", "a dog", "--max-seq-length", length, "--out", str(tmp_path / "v.npy")]
    )
    assert f"--max-seq-length {length} is outside 2..512" in line and "pass e.g. --max-seq-length 128" in line
