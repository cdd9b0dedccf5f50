"""WordNet 3.0 text pairs from Debian's ``wordnet-base`` (``/usr/share/wordnet/data.{noun,verb,adj,adv}``).

Each data line is one synset: ``offset lex_filenum ss_type w_cnt word lex_id ... | gloss``. The gloss splits on
``;`` into definition parts and quoted example sentences. Two pair kinds, grouped by synset (``pos:offset``):

- ``"gloss_lemmas"``: x = the definition ("a member of the genus Canis ..."), y = the lemma list ("dog, domestic
  dog, Canis familiaris"): a reverse dictionary, 117,659 pairs;
- ``"gloss_example"``: x = an example sentence ("the dog barked all night"), y = the definition of the sense it
  uses; one pair per example.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from crl.data.text.pairs import TextPair

__all__ = ["WORDNET_ROOT", "WordnetPairs", "parse_synset", "wordnet_pairs"]

WORDNET_ROOT = "/usr/share/wordnet"
"""Where Debian's ``wordnet-base`` installs the WordNet 3.0 database."""

WordnetPairs = Literal["gloss_lemmas", "gloss_example"]
_PARTS_OF_SPEECH = ("noun", "verb", "adj", "adv")


def parse_synset(line: str) -> tuple[str, list[str], str, list[str]]:
    """(offset, lemmas, definition, examples) of one data-file line.

    Lemmas have ``_`` turned into spaces and adjective markers like ``(a)`` removed; the definition is the
    gloss's non-quoted parts joined by "; "; examples are the quoted parts without their quotes.

    Raises:
        ValueError: if the line has no ``|`` gloss separator or a malformed word count.
    """
    if " | " not in line:
        raise ValueError(f"not a WordNet synset line (no ' | ' gloss): {line[:60]!r}")
    head, gloss = line.split(" | ", 1)
    fields = head.split()
    count = int(fields[3], 16)
    lemmas = [fields[4 + 2 * i].split("(")[0].replace("_", " ") for i in range(count)]
    definition_parts, examples = [], []
    for part in (piece.strip() for piece in gloss.strip().split(";")):
        if part.startswith('"'):
            example = part.strip('"').strip()
            if example:
                examples.append(example)
        elif part:
            definition_parts.append(part)
    return fields[0], lemmas, "; ".join(definition_parts), examples


def _synset_lines(root: Path) -> Iterator[tuple[str, str]]:
    """(part of speech, line) of every synset in the four data files (licence header lines skipped)."""
    for pos in _PARTS_OF_SPEECH:
        path = root / f"data.{pos}"
        with path.open(encoding="latin-1") as lines:
            for line in lines:
                if not line.startswith("  "):
                    yield pos, line


def wordnet_pairs(kind: WordnetPairs = "gloss_lemmas", root: str | Path = WORDNET_ROOT) -> list[TextPair]:
    """The text pairs of ``kind`` from the WordNet database at ``root`` (group = ``pos:offset``).

    Raises:
        ValueError: if ``root`` lacks the data files (naming the Debian package to install), or for an
            unknown kind.
    """
    if kind not in ("gloss_lemmas", "gloss_example"):
        raise ValueError(f"WordNet pairs {kind!r} are not known; use 'gloss_lemmas' or 'gloss_example'")
    folder = Path(root)
    missing = [f"data.{pos}" for pos in _PARTS_OF_SPEECH if not (folder / f"data.{pos}").is_file()]
    if missing:
        raise ValueError(
            f"WordNet files {', '.join(missing)} are missing under {str(folder)!r}; install the Debian package "
            "wordnet-base (apt-get install wordnet-base) or set [data] root to a WordNet 3.0 'dict' folder"
        )
    pairs = []
    for pos, line in _synset_lines(folder):
        offset, lemmas, definition, examples = parse_synset(line)
        if not definition:
            continue
        group = f"{pos}:{offset}"
        if kind == "gloss_lemmas":
            pairs.append(TextPair(definition, ", ".join(lemmas), group))
        else:
            pairs.extend(TextPair(example, definition, group) for example in examples)
    return pairs
