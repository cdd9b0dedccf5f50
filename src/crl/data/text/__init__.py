"""Text pair data for retrieval: WordNet, the KJV <-> WEB Bible, your own JSONL/TSV pairs; splits and qrels.

- :mod:`crl.data.text.wordnet`: gloss <-> lemma list and example <-> gloss pairs (Debian ``wordnet-base``);
- :mod:`crl.data.text.bible`: KJV -> WEB verse pairs mapped through SWORD (``sword-text-kjv``, ``sword-text-web``,
  ``python3-sword``), exported once and cached;
- :mod:`crl.data.text.gcide`: definition -> headword pairs of the GCIDE dictionary (``dict-gcide``);
- :mod:`crl.data.text.pairs_file`: (query, positive, negatives) from ``.jsonl`` / ``.tsv``;
- :mod:`crl.data.text.pairs`: :class:`TextPair`, the group-respecting :func:`split_pairs`, and
  :class:`RetrievalTask` (queries, corpus, qrels);
- :mod:`crl.data.text.source`: :class:`TextPairSource`, the tokenised pair source the training loop reads.

Nothing downloads anything: every source reads files that Debian packages (or you) put on disk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crl.data.text.bible import bible_pairs, default_cache_dir, export_bible, strip_osis
from crl.data.text.gcide import GCIDE_ROOT, gcide_pairs
from crl.data.text.pairs import RetrievalTask, Split, SplitFractions, TextPair, split_pairs
from crl.data.text.pairs_file import read_pairs_file
from crl.data.text.source import TextPairSource, item_ids
from crl.data.text.wordnet import WORDNET_ROOT, WordnetPairs, parse_synset, wordnet_pairs

__all__ = [
    "GCIDE_ROOT",
    "TEXT_SOURCES",
    "WORDNET_ROOT",
    "RetrievalTask",
    "Split",
    "SplitFractions",
    "TextOptions",
    "TextPair",
    "TextPairSource",
    "WordnetPairs",
    "bible_pairs",
    "default_cache_dir",
    "export_bible",
    "gcide_pairs",
    "item_ids",
    "load_split",
    "parse_synset",
    "read_pairs_file",
    "split_pairs",
    "strip_osis",
    "wordnet_pairs",
]


@dataclass(frozen=True)
class TextOptions:
    """Where the text sources find their data (each source reads the fields it needs)."""

    wordnet_root: str | Path = WORDNET_ROOT
    wordnet_kind: WordnetPairs = "gloss_lemmas"
    cache_dir: str | Path = ""
    path: str | Path = ""
    gcide_root: str | Path = GCIDE_ROOT


def _wordnet(options: TextOptions) -> list[TextPair]:
    return wordnet_pairs(options.wordnet_kind, options.wordnet_root)


def _bible(options: TextOptions) -> list[TextPair]:
    return bible_pairs(Path(options.cache_dir) if options.cache_dir else None)


def _gcide(options: TextOptions) -> list[TextPair]:
    return gcide_pairs(options.gcide_root)


def _text_pairs(options: TextOptions) -> list[TextPair]:
    return read_pairs_file(options.path)


TEXT_SOURCES: dict[str, Callable[[TextOptions], list[TextPair]]] = {
    "wordnet": _wordnet,
    "bible": _bible,
    "gcide": _gcide,
    "text_pairs": _text_pairs,
}
"""Every pair of a text source by its name (``[data] source``): a new source is one entry here."""


def load_split(
    source: str,
    split: Split,
    fractions: SplitFractions,
    *,
    wordnet_root: str | Path = WORDNET_ROOT,
    wordnet_kind: WordnetPairs = "gloss_lemmas",
    cache_dir: str | Path = "",
    path: str | Path = "",
    gcide_root: str | Path = "",
) -> list[TextPair]:
    """The pairs of one split of a text source of :data:`TEXT_SOURCES` (``"wordnet"``, ``"bible"``, ``"gcide"``,
    ``"text_pairs"``: a file); ``gcide_root`` '' is :data:`GCIDE_ROOT`.

    Raises:
        ValueError: for an unknown source, missing data (naming the Debian package), or a bad pairs file.
    """
    if source not in TEXT_SOURCES:
        known = ", ".join(map(repr, TEXT_SOURCES))
        raise ValueError(f"text source {source!r} is not known; use one of {known}")
    options = TextOptions(wordnet_root, wordnet_kind, cache_dir, path, gcide_root or GCIDE_ROOT)
    pairs = TEXT_SOURCES[source](options)
    return split_pairs(pairs, fractions)[split]
