"""Text pair sources: WordNet lines, the SWORD export, JSONL/TSV files, splits, qrels, item ids."""

import json
import random
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from crl.data.text import (
    RetrievalTask,
    SplitFractions,
    TextPair,
    bible_pairs,
    export_bible,
    item_ids,
    parse_synset,
    read_pairs_file,
    split_pairs,
    strip_osis,
    wordnet_pairs,
)
from crl.data.text import bible as bible_module

DOG = (
    "02084071 05 n 03 dog 0 domestic_dog 0 Canis_familiaris 0 001 @ 02083346 n 0000 | a member of the genus "
    'Canis; occurs in many breeds; "the dog barked all night"  \n'
)
WORDNET = Path("/usr/share/wordnet")
SWORD = Path("/usr/share/sword/modules/texts/ztext/engWEB2015eb")


def test_parse_synset_splits_lemmas_definition_and_examples() -> None:
    offset, lemmas, definition, examples = parse_synset(DOG)
    assert offset == "02084071"
    assert lemmas == ["dog", "domestic dog", "Canis familiaris"]
    assert definition == "a member of the genus Canis; occurs in many breeds"
    assert examples == ["the dog barked all night"]


def test_wordnet_pairs_from_a_small_database(tmp_path: Path) -> None:
    for pos in ("noun", "verb", "adj", "adv"):
        (tmp_path / f"data.{pos}").write_text("  1 licence header\n" + (DOG if pos == "noun" else ""))
    (pair,) = wordnet_pairs("gloss_lemmas", tmp_path)
    assert pair == TextPair(
        "a member of the genus Canis; occurs in many breeds",
        "dog, domestic dog, Canis familiaris",
        "noun:02084071",
    )
    (example,) = wordnet_pairs("gloss_example", tmp_path)
    assert (example.query, example.positive) == ("the dog barked all night", pair.query)


def test_missing_wordnet_names_the_debian_package(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="apt-get install wordnet-base"):
        wordnet_pairs("gloss_lemmas", tmp_path)


@pytest.mark.skipif(not WORDNET.is_dir(), reason="Debian package wordnet-base is not installed")
def test_real_wordnet_has_every_synset() -> None:
    pairs = wordnet_pairs("gloss_lemmas", WORDNET)
    assert len(pairs) == 117659
    assert any(p.positive == "dog, domestic dog, Canis familiaris" for p in pairs)


def test_strip_osis_removes_markup_notes_and_the_glossary() -> None:
    raw = (
        '<w lemma="strong:H7225">In</w> the beginning<note type="x">a note</note> , God '
        '<title>T</title>created. <div sID="g1" type="glossary"/> Abaddon is Hebrew for destruction.'
    )
    assert strip_osis(raw) == "In the beginning, God created."


def test_missing_sword_modules_name_the_debian_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bible_module, "SWORD_MODULES", tmp_path)
    with pytest.raises(ValueError, match="sword-text-kjv, sword-text-web"):
        bible_pairs(tmp_path / "cache")


@pytest.mark.skipif(
    not SWORD.is_dir(), reason="Debian packages sword-text-kjv/sword-text-web are not installed"
)
def test_bible_export_maps_kjv_to_web_verses(tmp_path: Path) -> None:
    try:
        path = export_bible(tmp_path)
    except ValueError as error:
        pytest.skip(str(error))
    verses = json.loads(path.read_text(encoding="utf-8"))["verses"]
    assert len(verses) == 31102  # every verse of the KJV versification
    reference, kjv, web = verses[0]
    assert reference == "Gen.1.1"
    assert strip_osis(kjv) == "In the beginning God created the heaven and the earth."
    assert strip_osis(web) == "In the beginning, God created the heavens and the earth."
    assert strip_osis(verses[-1][2]) == "The grace of the Lord Jesus Christ be with all the saints. Amen."


def test_jsonl_and_tsv_pairs(tmp_path: Path) -> None:
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text(
        json.dumps({"query": "q1", "positive": "d1", "negatives": ["n1"]})
        + "\n\n"
        + '{"query": "q2", "positive": "d2"}\n'
    )
    assert read_pairs_file(jsonl) == [TextPair("q1", "d1", "q1", ("n1",)), TextPair("q2", "d2", "q2")]
    tsv = tmp_path / "p.tsv"
    tsv.write_text("q1\td1\tn1\tn2\n")
    assert read_pairs_file(tsv) == [TextPair("q1", "d1", "q1", ("n1", "n2"))]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"query": "", "positive": "d"}\n', "p.jsonl:1: query is empty"),
        (b'{"query": "q", "positive": "d"}\n{"query": "q"}\n', "p.jsonl:2"),
        (b'{"query": "q", "positive": "\xff"}\n', "not UTF-8 text"),
        (b"\n\n", "no pairs"),
    ],
)
def test_bad_pairs_files_are_named(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        read_pairs_file(path)


def test_other_suffixes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.jsonl or \.tsv"):
        read_pairs_file(tmp_path / "p.csv")


pair_lists = st.lists(
    st.tuples(st.integers(0, 12), st.integers(0, 12), st.integers(0, 30)), min_size=1, max_size=60
).map(lambda rows: [TextPair(f"q{q}", f"d{d}", f"g{g}") for q, d, g in rows])


@settings(max_examples=60, deadline=None)
@given(pairs=pair_lists, seed=st.integers(0, 5))
def test_split_never_puts_a_group_or_a_query_on_two_sides(pairs: list[TextPair], seed: int) -> None:
    fractions = SplitFractions(0.3, 0.3, seed)
    split = split_pairs(pairs, fractions)
    side = {id(p): name for name, members in split.items() for p in members}
    assert sorted(map(id, pairs)) == sorted(side)
    for key in ("group", "query"):
        sides: dict[str, set[str]] = {}
        for pair in pairs:
            sides.setdefault(getattr(pair, key), set()).add(side[id(pair)])
        assert all(len(s) == 1 for s in sides.values())
    shuffled = random.Random(seed).sample(pairs, len(pairs))
    again = split_pairs(shuffled, fractions)
    assert {n: sorted((p.query, p.positive, p.group) for p in m) for n, m in again.items()} == {
        n: sorted((p.query, p.positive, p.group) for p in m) for n, m in split.items()
    }


def test_qrels_mark_every_document_a_query_names() -> None:
    pairs = [TextPair("gloss", "dog", "a"), TextPair("gloss", "hound", "b"), TextPair("other", "dog", "c")]
    task = RetrievalTask.from_pairs(pairs, extra_corpus=["cat"])
    assert task.queries == ("gloss", "other")
    assert task.corpus == ("dog", "hound", "cat")
    assert task.relevant == (frozenset({0, 1}), frozenset({0}))
    assert task.subset(1, seed=3).corpus == task.corpus
    assert len(task.subset(1).queries) == 1
    assert task.query_ids == ("q0", "q1") and task.doc_ids == ("d0", "d1", "d2")


def test_subset_and_limit_corpus_keep_each_ones_id() -> None:
    """The ids name the whole split's queries and documents, so a TREC run of a sample uses the split's ids."""
    pairs = [TextPair(f"query {i}", f"doc {i}", str(i)) for i in range(30)]
    task = RetrievalTask.from_pairs(pairs, extra_corpus=[f"other {i}" for i in range(20)])
    small = task.subset(5, seed=1).limit_corpus(12, seed=2)
    by_id = dict(zip(task.query_ids, task.queries, strict=True))
    docs = dict(zip(task.doc_ids, task.corpus, strict=True))
    assert [by_id[q] for q in small.query_ids] == list(small.queries)
    assert [docs[d] for d in small.doc_ids] == list(small.corpus) and len(small.corpus) == 12
    for query, relevant in zip(small.queries, small.relevant, strict=True):
        assert {small.corpus[d] for d in relevant} == {"doc " + query.split()[1]}


@pytest.mark.parametrize(
    ("query_ids", "doc_ids", "match"),
    [(("q",), ("d", "d"), "document id 'd' appears twice"), (("a b",), ("d", "e"), "query id 'a b'")],
)
def test_retrieval_task_ids_are_distinct_tokens(query_ids: tuple, doc_ids: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RetrievalTask(("x",), ("y", "z"), (frozenset({0}),), query_ids, doc_ids)


@settings(max_examples=60, deadline=None)
@given(pairs=pair_lists)
def test_item_ids_are_the_components_of_shared_texts(pairs: list[TextPair]) -> None:
    ids = item_ids(pairs)
    n = len(pairs)
    linked = [
        [pairs[i].query == pairs[j].query or pairs[i].positive == pairs[j].positive for j in range(n)]
        for i in range(n)
    ]
    reach = [row[:] for row in linked]
    for k in range(n):
        for i in range(n):
            if reach[i][k]:
                reach[i] = [a or b for a, b in zip(reach[i], reach[k], strict=True)]
    expected = torch.tensor([[reach[i][j] for j in range(n)] for i in range(n)])
    assert torch.equal(ids[:, None] == ids[None, :], expected)
