"""qrels and TSV files of a retrieval task of your own (``crl eval --queries --corpus --qrels``).

If these fail, a first qrels judgement scored ``1.0`` would be skipped as if it were a header, a pair judged twice
with different scores would keep the last one silently, or a corpus TSV's header line would become a document.
"""

from pathlib import Path

import pytest

from crl.metrics.task_files import read_qrels_file, read_texts
from crl.metrics.trec import read_qrels


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_first_beir_line_scored_1_0_is_an_error_not_a_header(tmp_path: Path) -> None:
    """q1 d1 1.0 on the first line was taken for a header and dropped: q1 lost its only relevant document."""
    qrels = _write(tmp_path / "qrels.tsv", "q1\td1\t1.0\nq2\td2\t1\n")
    with pytest.raises(ValueError, match=r"qrels.tsv:1: score '1.0' is not an integer"):
        read_qrels_file(qrels)


def test_beirs_own_header_is_skipped(tmp_path: Path) -> None:
    """The header BEIR writes is still optional: the judgements below it, written out by hand."""
    qrels = _write(tmp_path / "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n")
    assert read_qrels_file(qrels) == {"q1": {"d1": 1, "d2": 0}}


@pytest.mark.parametrize(
    ("name", "text"),
    [("qrels.tsv", "q1\td1\t1\nq2\td2\t1\nq1\td1\t0\n"), ("qrels.txt", "q1 0 d1 1\nq2 0 d2 1\nq1 0 d1 0\n")],
    ids=["beir", "trec"],
)
def test_a_pair_judged_twice_otherwise_names_both_lines(tmp_path: Path, name: str, text: str) -> None:
    """(q1, d1) judged 1 then 0 kept the 0 silently, and q1 was no longer evaluated."""
    qrels = _write(tmp_path / name, text)
    with pytest.raises(ValueError, match=rf"{name}:3: \('q1', 'd1'\) is judged 0 here and 1 at .*{name}:1"):
        read_qrels_file(qrels)


def test_a_pair_judged_twice_alike_is_one_judgement(tmp_path: Path) -> None:
    qrels = _write(tmp_path / "qrels.txt", "q1 0 d1 1\nq1 0 d1 1\n")
    assert read_qrels(qrels) == {"q1": {"d1": 1}}


def test_a_corpus_tsv_header_is_an_error_not_a_document(tmp_path: Path) -> None:
    """id<TAB>text on the first line became the document 'id' with the text 'text'."""
    corpus = _write(tmp_path / "corpus.tsv", "id\ttext\nd1\tthe sea\n")
    with pytest.raises(ValueError, match=r"corpus.tsv:1: 'id\\ttext' is a header"):
        read_texts(corpus, "corpus")
    assert read_texts(_write(tmp_path / "plain.tsv", "d1\tthe sea\n"), "corpus") == {"d1": "the sea"}
