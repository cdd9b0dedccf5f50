"""Low-severity messages of the commands: an index replaced silently, a name too long for Milvus, bytes that are
not UTF-8, digits that are not ASCII, and a folder or FIFO given for a file.

If these fail, ``crl index build --out`` would replace an index of 7 items by one of 2 without a word, a long
collection name or a non-UTF-8 query would print a traceback, ``'٣'`` would be read as item 3, or a folder or FIFO
would be reported as missing (or a FIFO would hang the command).
"""

import os
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from crl.commands import app
from crl.search import Index
from crl.serving.queries import query_items


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def _one_error_line(*args: str) -> str:
    """Run crl; assert exit status 2 and one ``error:`` line, and return it."""
    code, output = _invoke(*args)
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0]


def test_index_build_refuses_to_replace_an_index_without_overwrite(tmp_path: Path) -> None:
    """crl index build --out over an index of 7 items replaced it by one of 2, exit 0."""
    seven, two = tmp_path / "seven.txt", tmp_path / "two.txt"
    seven.write_text("".join(f"line number {i}\n" for i in range(7)), encoding="utf-8")
    two.write_text("the sea\nthe dog\n", encoding="utf-8")
    out = tmp_path / "idx"
    build = ["index", "build", "minilm", "--out", str(out), "--text-file"]
    assert _invoke(*build, str(seven))[0] == 0
    line = _one_error_line(*build, str(two))
    assert "holds an index" in line and "--overwrite" in line
    assert len(Index.load(out)) == 7
    assert _invoke(*build, str(two), "--overwrite")[0] == 0
    assert len(Index.load(out)) == 2


def test_a_collection_name_too_long_for_milvus_is_one_line() -> None:
    """A 300-character collection name reached the server and printed a traceback."""
    line = _one_error_line("search", f"milvus://127.0.0.1:1/{'a' * 300}", "1")
    assert "300 characters" in line and "255" in line


def test_a_query_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    """A query holding the byte 0xff (passed by the shell as a lone surrogate) was a TypeError from the tokenizer."""
    Index.build(np.eye(4, dtype=np.float32)).save(tmp_path / "idx")
    line = _one_error_line("search", str(tmp_path / "idx"), "caf\udcff")
    assert "b'\\xff'" in line and "not UTF-8" in line


def test_only_ascii_digits_are_an_item_id() -> None:
    """'٣' (ARABIC-INDIC DIGIT THREE) was read as item 3; it is text, as are other scripts' digits."""
    assert query_items(["3", "٣", "௩", " 12 "]) == [3, None, None, 12]


def test_a_folder_or_a_fifo_is_not_called_missing(tmp_path: Path) -> None:
    """A folder or a FIFO given as --text-file was reported as "does not exist" (a FIFO could also block)."""
    folder, fifo = tmp_path / "folder", tmp_path / "fifo"
    folder.mkdir()
    os.mkfifo(fifo)
    build = ["index", "build", "minilm", "--out", str(tmp_path / "idx"), "--text-file"]
    assert "is a folder, not a file" in _one_error_line(*build, str(folder))
    assert "is not a regular file (a FIFO" in _one_error_line(*build, str(fifo))
    assert "is a folder, not a file" in _one_error_line("train", str(folder))
    missing = _one_error_line(*build, str(tmp_path / "absent.txt"))
    assert "does not exist" in missing
