"""Text files read as items, pairs, queries, corpora and qrels: a byte order mark, relevance scores Python's
``int`` reads but trec_eval does not, and a TSV header of other column names.

If these fail, the BOM some editors write at the start of a UTF-8 file would stay inside item 0's text (and its
embedding, and its exact-match filters), "1_0" would be read as relevance 10 and an Arabic-Indic "١" as 1, and a
corpus's header line "doc_no<TAB>Body" would be ranked as a document.
"""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crl._lines import lines_of_items
from crl.commands import app
from crl.data.text.pairs_file import read_pairs_file
from crl.metrics.task_files import read_qrels_file, read_texts
from crl.metrics.trec import read_qrels

BOM = "\ufeff"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_bom_opening_a_file_is_not_item_zeros_text(tmp_path: Path) -> None:
    """Item 0's text was "\\ufeffthe sea" (and a JSONL file opening with a BOM was not JSON)."""
    assert lines_of_items(BOM + "the sea\na dog\n", "items") == ["the sea", "a dog"]
    pairs = read_pairs_file(
        _write(tmp_path / "p.jsonl", BOM + json.dumps({"query": "q", "positive": "p"}) + "\n")
    )
    assert pairs[0].query == "q"
    assert read_texts(_write(tmp_path / "c.tsv", BOM + "d1\tthe sea\n"), "corpus") == {"d1": "the sea"}
    assert read_qrels(_write(tmp_path / "q.txt", BOM + "q1 0 d1 1\n")) == {"q1": {"d1": 1}}
    assert lines_of_items("a\ufeffb\n", "items") == ["a\ufeffb"]


@pytest.mark.parametrize("score", ["1_0", "١", "１", "1.0", "+"])
@pytest.mark.parametrize(("name", "line"), [("qrels.tsv", "q1\td1\t{}\n"), ("qrels.txt", "q1 0 d1 {}\n")])
def test_a_relevance_of_other_than_ascii_digits_is_an_error(
    tmp_path: Path, name: str, line: str, score: str
) -> None:
    """ "1_0" was read as relevance 10, Arabic-Indic "١" and full-width "１" as 1 (Python's int reads them)."""
    qrels = _write(tmp_path / name, line.format(score))
    with pytest.raises(ValueError, match=rf"{name}:1: .* is not an integer of ASCII digits"):
        read_qrels_file(qrels)


def test_a_signed_ascii_relevance_is_read(tmp_path: Path) -> None:
    assert read_qrels(_write(tmp_path / "q.txt", "q1 0 d1 -1\nq1 0 d2 +2\n")) == {"q1": {"d1": -1, "d2": 2}}


@pytest.mark.parametrize("header", ["doc_no\tBody", "docid\tcontent", "query-id\tquery_text", "ID\tPassage"])
def test_a_tsv_header_of_other_column_names_is_an_error_not_a_document(tmp_path: Path, header: str) -> None:
    """Only "id<TAB>text" and a few others were known headers: "doc_no<TAB>Body" became a document."""
    corpus = _write(tmp_path / "corpus.tsv", f"{header}\nd1\tthe sea\n")
    with pytest.raises(ValueError, match=r"corpus.tsv:1: .* is a header"):
        read_texts(corpus, "corpus")


@pytest.mark.parametrize("first", ["d1\tthe text", "kid\ta child", "squid\tink", "text\tid"])
def test_a_first_document_is_not_taken_for_a_header(tmp_path: Path, first: str) -> None:
    """A document whose id or text only looks like a column name is read."""
    corpus = _write(tmp_path / "corpus.tsv", f"{first}\nd2\tthe sea\n")
    assert len(read_texts(corpus, "corpus")) == 2


def test_crl_eval_names_a_header_of_your_queries(tmp_path: Path) -> None:
    """The same rule reads ``crl eval --queries``: one line naming the file and the line."""
    queries = _write(tmp_path / "queries.tsv", "qid\tquestion\nq1\twhere is the sea\n")
    corpus = _write(tmp_path / "corpus.tsv", "d1\tthe sea\n")
    qrels = _write(tmp_path / "qrels.tsv", "q1\td1\t1\n")
    result = CliRunner().invoke(
        app,
        ["eval", str(tmp_path), "--queries", str(queries), "--corpus", str(corpus), "--qrels", str(qrels)],
    )
    assert result.exit_code == 2 and "queries.tsv:1: 'qid\\tquestion' is a header" in result.output, (
        result.output
    )
