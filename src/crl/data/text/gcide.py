"""GCIDE definition <-> headword pairs from Debian's ``dict-gcide`` (the GNU Collaborative International Dictionary
of English: Webster's 1913 and later additions, GPL).

The dictionary ships in dictd's format: ``gcide.index`` (one line per headword: the word, then the offset and length
of its entry in base-64 digits) and ``gcide.dict.dz`` (the entries, gzip-readable). An entry holds a header line
(``Word \\Pro*nun"ci*a`tion\\, n. [etymology]``), then its senses: numbered paragraphs (``1. ...``) or, for a
one-sense entry, the text after the header; quotations (indented further, or after ``--Author``), ``Syn:`` and
``Note:`` paragraphs, phrase sub-entries (``{Phrase}``) and the source tags (``[1913 Webster]``) are not
definitions.

An index line whose word is not its entry's headword (a phrase such as "Common law" pointing into the entry
"Common") is skipped: its entry's senses are not its own.

Pairs: x = one sense's definition (at least :data:`MIN_WORDS` words, markup and citations stripped), y = the
headword, grouped by the headword in lower case, so every sense of a word falls in one split. An entry reached from
several index lines, or a sense that repeats, gives one pair: pairs are deduplicated on (headword in lower case,
definition).
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from crl.data.text.pairs import TextPair

__all__ = ["GCIDE_ROOT", "MIN_WORDS", "entry_definitions", "entry_word", "gcide_pairs"]

GCIDE_ROOT = Path("/usr/share/dictd")
MIN_WORDS = 3
"""A definition shorter than this many words (a cross-reference such as "See {Allow}.") is dropped."""

_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_SENSE = re.compile(r"^\s*(?:\d+\.|\([a-z]\))\s+")
_TAGS = re.compile(r"\[(?:1913 Webster|WordNet[^\]]*|PJC|Century Dict\.|Webster 1913 Suppl\.|Obs\.|R\.)\]")
_BRACKETS = re.compile(r"\[[^\]]*\]")
_CITATION = re.compile(r"--\s*[A-Z][^.]*\.?")
_MARKUP = re.compile(r"[{}]")
_CHARACTER = re.compile(r"\[[^\]\s]{1,4}\]")
"""GCIDE's character markup inside words ([e^], [=e], [ae]), dropped before brackets are matched."""


def _number(digits: str) -> int:
    """A dictd base-64 number."""
    value = 0
    for character in digits:
        value = value * 64 + _DIGITS.index(character)
    return value


def _clean(text: str) -> str:
    """One definition's plain text: source tags, bracketed notes, citations and brace markup removed, spaces
    joined."""
    text = _CITATION.sub(" ", _BRACKETS.sub(" ", _TAGS.sub(" ", text)))
    return " ".join(_MARKUP.sub("", text).split()).strip(" ;,")


def _header_end(lines: list[str]) -> int:
    """The number of lines of the entry's header: its first line, and the lines that close an etymology bracket it
    leaves open."""
    depth, index = 0, 0
    for index, line in enumerate(lines):
        depth += line.count("[") - line.count("]")
        if depth <= 0:
            return index + 1
    return index + 1


def entry_word(entry: str) -> str:
    """The headword an entry's header line names (its text before the pronunciation), in lower case."""
    first = entry.strip("\n").split("\n", 1)[0]
    return " ".join(first.split("\\", 1)[0].split()).lower()


def entry_definitions(entry: str) -> list[str]:
    """The definitions of one dictionary entry, in order (module docstring)."""
    entry = _CHARACTER.sub("", entry)
    paragraphs = [block.split("\n") for block in re.split(r"\n\s*\n", entry.strip("\n")) if block.strip()]
    if not paragraphs:
        return []
    first = paragraphs[0]
    head = _header_end(first)
    blocks = [first[head:], *paragraphs[1:]]
    found = []
    for block in blocks:
        lines = [line for line in block if line.strip()]
        if not lines or len(lines[0]) - len(lines[0].lstrip()) > 6:
            continue
        start = lines[0].strip()
        if start.startswith(("Syn:", "Note:", "{", "[")):
            continue
        if block is not blocks[0] and not _SENSE.match(lines[0]):
            continue
        text = _clean(_SENSE.sub("", " ".join(line.strip() for line in lines)))
        if len(text.split()) >= MIN_WORDS:
            found.append(text)
    return found


def gcide_pairs(root: str | Path = GCIDE_ROOT) -> list[TextPair]:
    """Definition -> headword pairs of the whole dictionary, deduplicated, grouped by headword (module docstring).

    Raises:
        ValueError: naming the Debian package when ``gcide.index`` or ``gcide.dict.dz`` is missing.
    """
    folder = Path(root)
    index, body = folder / "gcide.index", folder / "gcide.dict.dz"
    if not index.is_file() or not body.is_file():
        raise ValueError(
            f"GCIDE is not installed at {folder} (gcide.index, gcide.dict.dz); install the Debian package with "
            "apt-get install dict-gcide (make data does this where apt-get works)"
        )
    with gzip.open(body) as handle:
        data = handle.read()
    seen: set[tuple[str, str]] = set()
    pairs = []
    for line in index.read_text(encoding="utf-8").splitlines():
        word, offset, length = line.split("\t")
        if word.startswith("00-") or not word.strip():
            continue
        start = _number(offset)
        entry = data[start : start + _number(length)].decode("utf-8", "replace")
        if entry_word(entry) != word.lower():
            continue
        for definition in entry_definitions(entry):
            key = (word.lower(), definition)
            if key not in seen:
                seen.add(key)
                pairs.append(TextPair(definition, word, word.lower()))
    return pairs
