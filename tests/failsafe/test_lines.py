"""Lines of text files: split at "\\n" only, and ids that are line numbers.

If these fail, a U+2028 or U+0085 inside a JSONL text would break its line in two (a JSON error, or a pair lost),
and ``--text-file`` would split at them and drop blank lines, so item ids would drift from line numbers.
"""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crl._lines import split_lines
from crl.commands import app
from crl.data.text.pairs_file import read_pairs_file
from crl.search import Index

BREAKS = "\u2028\u2029\u0085\x0c\x1c"
"""Characters str.splitlines breaks at that are text inside a line for crl."""


def test_split_lines_splits_at_newline_only() -> None:
    """The reference is written out by hand: three lines, the second holding every other break character."""
    text = f"first\r\nsecond{BREAKS}end\nthird\n"
    assert split_lines(text) == ["first", f"second{BREAKS}end", "third"]
    assert split_lines("no final newline") == ["no final newline"]
    assert split_lines("a\n\nb") == ["a", "", "b"]


def test_a_jsonl_text_holding_u2028_and_u0085_keeps_its_pair(tmp_path: Path) -> None:
    """json.dumps(ensure_ascii=False) writes U+2028 and U+0085 as they are; splitlines broke the line there."""
    pairs = [{"query": f"a{BREAKS}b", "positive": "the sea"}, {"query": "a dog", "positive": "c\u2028d"}]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    read = read_pairs_file(path)
    assert [(p.query, p.positive) for p in read] == [(p["query"], p["positive"]) for p in pairs]


def test_text_file_item_ids_are_line_numbers(tmp_path: Path) -> None:
    """A U+0085 inside a line made two items of it, shifting every later id against its line number."""
    lines = ["a large expanse of sea", "the domestic\u0085dog", "to run quickly"]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ["index", "build", "minilm", "--text-file", str(corpus), "--out", str(tmp_path / "idx")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    index = Index.load(tmp_path / "idx")
    assert [meta["text"] for meta in index.metadata(index.ids)] == lines  # type: ignore[index]


@pytest.mark.parametrize("command", ["index", "embed"])
def test_a_blank_line_of_a_text_file_is_named_not_skipped(tmp_path: Path, command: str) -> None:
    """A blank line was dropped, so the items after it took the ids of the lines before them."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the sea\n\nthe dog\n", encoding="utf-8")
    args = (
        ["index", "build", "minilm", "--text-file", str(corpus), "--out", str(tmp_path / "idx")]
        if command == "index"
        else ["embed", "minilm", "--text-file", str(corpus), "--out", str(tmp_path / "v.npy")]
    )
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"{corpus}:2 is blank" in result.output
