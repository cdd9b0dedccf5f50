"""Text pairs, their deterministic train/validation/test split, and the retrieval task of a split.

A :class:`TextPair` is (query x, positive document y, group, hard negatives). The *group* names what must never
sit on both sides of a split (a WordNet synset, a Bible chapter, or for your own pairs the query itself).
:func:`split_pairs` joins groups that share a query text (identical queries on both sides would leak the answer)
into one component, and sends each component to train, validation or test by a hash of its smallest key, so
the split depends only on the pairs and the seed, not on their order or on the other pairs.

:class:`RetrievalTask` turns the pairs of a split into queries, a corpus and relevance judgements (qrels):
identical query texts become one query and identical document texts one document, and a query is relevant to
every document that any of its pairs names (several synsets can share a gloss, several glosses a lemma list).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["RetrievalTask", "Split", "SplitFractions", "TextPair", "split_pairs"]

Split = Literal["train", "val", "test"]


@dataclass(frozen=True)
class TextPair:
    """One pair (x, y): a query and its relevant document, the group it belongs to, and optional hard negatives."""

    query: str
    positive: str
    group: str
    negatives: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class SplitFractions:
    """Fractions of the components held out for validation and test (the rest trains), and the hash seed."""

    val: float = 0.05
    test: float = 0.05
    seed: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.val < 1 and 0 <= self.test < 1 and self.val + self.test < 1):
            raise ValueError(
                f"val = {self.val} and test = {self.test} must be fractions in [0, 1) with val + test < 1"
            )


class _Components:
    """Union-find over string keys (the groups and query texts of the pairs)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, key: str) -> str:
        root = self.parent.setdefault(key, key)
        while root != self.parent[root]:
            root = self.parent[root]
        while key != root:
            self.parent[key], key = root, self.parent[key]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _hash_unit(key: str, seed: int) -> float:
    """u = SHA-256(seed, key) read as a number in [0, 1): the same key and seed always give the same u."""
    digest = hashlib.sha256(f"{seed}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def split_pairs(pairs: Sequence[TextPair], fractions: SplitFractions) -> dict[Split, list[TextPair]]:
    """Train/val/test pairs: u < test -> test, u < test + val -> val, else train, with u = :func:`_hash_unit`
    of the component's smallest key (components join pairs sharing a group or a query text).

    Raises:
        ValueError: if there are no pairs.
    """
    if not pairs:
        raise ValueError("no text pairs to split; the data source gave none")
    components = _Components()
    for pair in pairs:
        components.union("g:" + pair.group, "q:" + pair.query)
    out: dict[Split, list[TextPair]] = {"train": [], "val": [], "test": []}
    side: dict[str, Split] = {}
    for pair in pairs:
        root = components.find("g:" + pair.group)
        if root not in side:
            u = _hash_unit(root, fractions.seed)
            side[root] = (
                "test" if u < fractions.test else "val" if u < fractions.test + fractions.val else "train"
            )
        out[side[root]].append(pair)
    return out


@dataclass(frozen=True)
class RetrievalTask:
    """Queries, a corpus and qrels: ``relevant[q]`` is the set of corpus indices relevant to query q.

    ``grades``, empty for binary relevance (every relevant document at grade 1), holds per query
    ``{corpus index: grade > 0}`` over ``relevant[q]`` (graded qrels, such as BEIR's, scored with graded gains
    by :mod:`crl.metrics.ir`).

    ``query_ids`` and ``doc_ids`` name the queries and documents (distinct, whitespace-free: TREC ids); a task
    made from pairs names them ``q0, q1, ...`` and ``d0, d1, ...`` by their first appearance, and
    :meth:`subset` and :meth:`limit_corpus` keep each one's name.

    Raises:
        ValueError: if the tuples' lengths disagree, an id repeats or holds whitespace, a relevant index is
            not a corpus index, or ``grades`` does not grade each query's relevant documents above 0.
    """

    queries: tuple[str, ...]
    corpus: tuple[str, ...]
    relevant: tuple[frozenset[int], ...]
    query_ids: tuple[str, ...]
    doc_ids: tuple[str, ...]
    grades: tuple[Mapping[int, int], ...] = field(default=(), hash=False)

    def __post_init__(self) -> None:
        if not len(self.queries) == len(self.relevant) == len(self.query_ids):
            raise ValueError(
                f"{len(self.queries)} queries, {len(self.relevant)} relevance sets and {len(self.query_ids)} query"
                " ids; pass one of each per query"
            )
        if len(self.corpus) != len(self.doc_ids):
            raise ValueError(
                f"{len(self.corpus)} documents and {len(self.doc_ids)} ids; pass one id per document"
            )
        for what, ids in (("query", self.query_ids), ("document", self.doc_ids)):
            _check_ids(what, ids)
        if any(d < 0 or d >= len(self.corpus) for r in self.relevant for d in r):
            raise ValueError(f"a relevant index is not one of the {len(self.corpus)} corpus indices")
        if self.grades and (
            len(self.grades) != len(self.relevant)
            or any(
                set(g) != r or min(g.values()) < 1 for g, r in zip(self.grades, self.relevant, strict=True)
            )
        ):
            raise ValueError(
                "grades must hold, per query, a grade >= 1 for each relevant document; or pass none"
            )

    @property
    def graded(self) -> bool:
        """Whether some document is judged above grade 1 (then nDCG and MAP follow trec_eval: crl.metrics.ir)."""
        return any(grade > 1 for grades in self.grades for grade in grades.values())

    def qrels(self) -> list[list[int]] | list[dict[int, int]]:
        """Per query its relevant corpus indices (binary) or ``{index: grade}`` (graded), for
        :func:`crl.metrics.ir.evaluate_index`."""
        if self.grades:
            return [dict(grades) for grades in self.grades]
        return [sorted(r) for r in self.relevant]

    @classmethod
    def from_pairs(cls, pairs: Iterable[TextPair], *, extra_corpus: Iterable[str] = ()) -> RetrievalTask:
        """Unique query texts, unique document texts (the positives, then ``extra_corpus`` distractors), and for
        each query every document some pair of it names.

        Raises:
            ValueError: if there are no pairs.
        """
        query_index: dict[str, int] = {}
        doc_index: dict[str, int] = {}
        relevant: list[set[int]] = []
        for pair in pairs:
            q = query_index.setdefault(pair.query, len(query_index))
            d = doc_index.setdefault(pair.positive, len(doc_index))
            if q == len(relevant):
                relevant.append(set())
            relevant[q].add(d)
        if not query_index:
            raise ValueError("a retrieval task needs at least one pair; this split is empty")
        for text in extra_corpus:
            doc_index.setdefault(text, len(doc_index))
        return cls(
            tuple(query_index),
            tuple(doc_index),
            tuple(frozenset(r) for r in relevant),
            tuple(f"q{q}" for q in range(len(query_index))),
            tuple(f"d{d}" for d in range(len(doc_index))),
        )

    def subset(self, n_queries: int, seed: int = 0) -> RetrievalTask:
        """``n_queries`` queries (those of smallest hash u(seed, text), so a fixed sample) over the whole corpus
        (0: all queries)."""
        if n_queries <= 0 or n_queries >= len(self.queries):
            return self
        order = sorted(range(len(self.queries)), key=lambda q: _hash_unit(self.queries[q], seed))[:n_queries]
        keep = sorted(order)
        return RetrievalTask(
            tuple(self.queries[q] for q in keep),
            self.corpus,
            tuple(self.relevant[q] for q in keep),
            tuple(self.query_ids[q] for q in keep),
            self.doc_ids,
            tuple(self.grades[q] for q in keep) if self.grades else (),
        )

    def limit_corpus(self, n_documents: int, seed: int = 0) -> RetrievalTask:
        """The corpus cut to ``n_documents``: every relevant document, then distractors of smallest hash u(seed, text)
        (0 or a larger number: the whole corpus). Relevance is re-indexed; no judgement is lost."""
        if n_documents <= 0 or n_documents >= len(self.corpus):
            return self
        needed = sorted(set().union(*self.relevant))
        others = sorted(
            (d for d in range(len(self.corpus)) if d not in set(needed)),
            key=lambda d: _hash_unit(self.corpus[d], seed),
        )
        keep = sorted(needed + others[: max(0, n_documents - len(needed))])
        new_index = {old: new for new, old in enumerate(keep)}
        return RetrievalTask(
            self.queries,
            tuple(self.corpus[d] for d in keep),
            tuple(frozenset(new_index[d] for d in r) for r in self.relevant),
            self.query_ids,
            tuple(self.doc_ids[d] for d in keep),
            tuple({new_index[d]: g for d, g in grades.items()} for grades in self.grades),
        )


def _check_ids(what: str, ids: Sequence[str]) -> None:
    """Each id a non-empty string without whitespace, none repeated (naming the first that is not)."""
    seen: set[str] = set()
    for name in ids:
        if not isinstance(name, str) or not name or any(ch.isspace() for ch in name):
            raise ValueError(f"{what} id {name!r} is empty or holds whitespace; ids are single tokens (TREC)")
        if name in seen:
            raise ValueError(f"{what} id {name!r} appears twice; give each {what} its own id")
        seen.add(name)
