"""IR metrics, the kNN monitor and the run/qrels/pairs readers on the inputs that gave values above 1, NaN, a
torch error or a silently split text."""

from pathlib import Path

import numpy as np
import pytest
import torch

from crl.data.text import read_pairs_file
from crl.data.text.pairs import TextPair
from crl.metrics.classification import knn_accuracy
from crl.metrics.ir import evaluate_index, ir_metrics_from_ranking
from crl.metrics.trec import read_qrels, read_run, relevant_sets
from crl.search import Index

KS = {"recall": (2,), "ndcg": (2,)}


def test_a_ranking_that_repeats_a_document_is_an_error() -> None:
    """('a', 3.0), ('a', 2.0) counted two hits: recall@2 = 2.0, nDCG@2 = 1.63; now a ValueError naming both."""
    ranking = {"q": [("a", 3.0), ("a", 2.0), ("b", 1.0)]}
    with pytest.raises(ValueError, match=r"ranking\['q'\] holds the item 'a' more than once"):
        ir_metrics_from_ranking(ranking, {"q": {"a"}}, ks=KS)


def test_read_run_keeps_each_documents_best_line_and_warns(tmp_path: Path) -> None:
    """read_run kept both lines of a repeated document; now the best one, with a warning counting the rest."""
    run = tmp_path / "run.txt"
    run.write_text("q Q0 a 1 2.0 t\nq Q0 b 2 1.0 t\nq Q0 a 3 3.0 t\nq Q0 a 4 0.5 t\n")
    with pytest.warns(UserWarning, match=r"run\.txt: 2 lines repeat a \(query, document\) pair"):
        ranking = read_run(run)
    assert ranking == {"q": [("a", 3.0), ("b", 1.0)]}
    report = ir_metrics_from_ranking(ranking, {"q": {"a"}}, ks=KS)
    assert report.values == {"recall": {2: 1.0}, "ndcg": {2: 1.0}}


def test_read_qrels_names_the_line_of_a_byte_that_is_not_utf8(tmp_path: Path) -> None:
    """A Latin-1 byte raised a bare UnicodeDecodeError; now the file, line and byte are named."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_bytes(b"q 0 a 1\nq 0 caf\xe9 1\n")
    with pytest.raises(
        ValueError, match=r"qrels\.txt:2: not UTF-8 text .* at byte 15\); save the file as UTF-8"
    ):
        relevant_sets(read_qrels(qrels))


def test_knn_accuracy_refuses_a_label_of_minus_one() -> None:
    """A train label -1 raised torch's scatter index error, a test label -1 counted as a miss; now both name the
    argument."""
    features = torch.eye(4)
    labels = torch.tensor([0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"train_labels holds the label -1; classes are 0, 1, \.\.\."):
        knn_accuracy(features, torch.tensor([0, -1, 0, 1]), features, labels, k=2)
    with pytest.raises(ValueError, match="test_labels holds the label -1"):
        knn_accuracy(features, labels, features, torch.tensor([0, 1, -1, 1]), k=2)


def test_knn_accuracy_refuses_an_empty_test_set() -> None:
    """An empty test set raised torch's 'max(): Expected reduction dim'; now a ValueError: accuracy undefined."""
    with pytest.raises(ValueError, match="test_features has no rows: the accuracy of an empty test set"):
        knn_accuracy(
            torch.eye(4), torch.tensor([0, 1, 0, 1]), torch.empty(0, 4), torch.empty(0, dtype=torch.long)
        )


def test_evaluate_index_refuses_a_one_dimensional_query() -> None:
    """A 1-D query gave 'qrels has 1 entries for -1 queries'; now it names queries and the reshape."""
    index = Index.build(np.eye(4, dtype=np.float32))
    with pytest.raises(
        ValueError, match=r"queries must be a 2-D array \(q, d\), got shape \(4,\); .*reshape"
    ):
        evaluate_index(index, np.ones(4, dtype=np.float32), qrels=[[0]], ks={"recall": (1,)})


def test_a_lone_surrogate_in_a_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    """ "\\ud800" in a JSON string loaded as text that no encoder can take; now an error at its line."""
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"query": "fine", "positive": "ok"}\n{"query": "a\\ud800b", "positive": "p"}\n')
    with pytest.raises(ValueError, match=r"pairs\.jsonl:2: query holds the lone surrogate '\\ud800'"):
        read_pairs_file(pairs)


def test_a_tab_inside_tsv_text_needs_quoting(tmp_path: Path) -> None:
    """A TAB inside a text split it into a negative silently; a quoted field now keeps it, and a field that starts
    with a quote but is not quoted whole is an error naming the line."""
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text('"tab\there"\tpositive\tsay "hi"\n')
    assert read_pairs_file(pairs) == [TextPair("tab\there", "positive", "tab\there", ('say "hi"',))]
    pairs.write_text('q\tp\n"half" quoted\tp\n')
    with pytest.raises(
        ValueError, match=r"pairs\.tsv:2: a field starting with a double quote must be quoted whole"
    ):
        read_pairs_file(pairs)
