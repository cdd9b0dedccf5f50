"""GCIDE definition <-> headword pairs: the dictd reader on a constructed dictionary, and the installed one."""

import gzip
from pathlib import Path

import pytest

from crl.data.text import load_split
from crl.data.text.gcide import GCIDE_ROOT, entry_definitions, entry_word, gcide_pairs
from crl.data.text.pairs import SplitFractions
from crl.train.config import parse_config

DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

ALLOCATE = """Allocate \\Al"lo*cate\\, v. t. [LL. allocatus, p. p. of allocare,
   fr. L. ad + locare to place. See {Allow}.]
   1. To distribute or assign; to allot. --Burke.
      [1913 Webster]

   2. To localize in a place. [R.]
      [1913 Webster]

            The allocation of the particular portions of
            Palestine to its successive inhabitants. --A. R.
                                                  Stanley.
      [1913 Webster]

   Syn: allot, assign, apportion.
"""
ALLNIGHT = """Allnight \\All"night`\\, n.
   Light, fuel, or food for the whole night. [Obs.] --Bacon.
   [1913 Webster]
"""
MESQUITE = """Mesquite \\Mes*quite"\\ (m[e^]s*k[=e]t"), n. (Bot.)
   A spiny tree of the southwestern part of North America.
   [1913 Webster]

   Note: The beans are used for fodder.
"""
SEE = """Allottee \\Al*lot*tee"\\, n.
   See {Allot}.
"""


def base64(value: int) -> str:
    """dictd's base-64 number."""
    digits = ""
    while True:
        digits = DIGITS[value % 64] + digits
        value //= 64
        if value == 0:
            return digits


def write_dictionary(folder: Path, index: list[tuple[str, str]]) -> None:
    """gcide.index and gcide.dict.dz holding each (index word, entry)."""
    body, lines, offsets = b"", [], {}
    for word, entry in index:
        if entry not in offsets:
            offsets[entry] = len(body)
            body += entry.encode()
        lines.append(f"{word}\t{base64(offsets[entry])}\t{base64(len(entry.encode()))}")
    (folder / "gcide.index").write_text(
        "00-database-info\tA\tB\n" + "\n".join(lines) + "\n", encoding="utf-8"
    )
    with gzip.open(folder / "gcide.dict.dz", "wb") as handle:
        handle.write(body)


def test_an_entry_gives_its_senses_without_quotations_tags_or_citations() -> None:
    """If this fails, a pair's definition carries a quotation, a Syn: list, a source tag or a citation, or a
    numbered sense is lost."""
    assert entry_definitions(ALLOCATE) == ["To distribute or assign; to allot.", "To localize in a place."]
    assert entry_definitions(ALLNIGHT) == ["Light, fuel, or food for the whole night."]
    assert entry_definitions(MESQUITE) == ["A spiny tree of the southwestern part of North America."]
    assert entry_definitions(SEE) == []
    assert entry_word(MESQUITE) == "mesquite"


def test_the_dictionary_gives_deduplicated_pairs_grouped_by_headword(tmp_path: Path) -> None:
    """If this fails, a phrase is paired with its parent entry's senses, a repeated index line doubles a pair, or
    the pairs are not definition -> headword grouped by headword."""
    write_dictionary(
        tmp_path,
        [
            ("Allocate", ALLOCATE),
            ("allocate", ALLOCATE),
            ("Allocate funds", ALLOCATE),
            ("Allnight", ALLNIGHT),
            ("Mesquite", MESQUITE),
            ("Allottee", SEE),
        ],
    )
    pairs = gcide_pairs(tmp_path)
    assert [(p.query, p.positive, p.group) for p in pairs] == [
        ("To distribute or assign; to allot.", "Allocate", "allocate"),
        ("To localize in a place.", "Allocate", "allocate"),
        ("Light, fuel, or food for the whole night.", "Allnight", "allnight"),
        ("A spiny tree of the southwestern part of North America.", "Mesquite", "mesquite"),
    ]


def test_a_missing_dictionary_names_the_package(tmp_path: Path) -> None:
    """If this fails, a machine without dict-gcide gets a traceback instead of the package to install."""
    with pytest.raises(ValueError, match="apt-get install dict-gcide"):
        gcide_pairs(tmp_path)


def test_the_locked_config_takes_gcide_with_minilm() -> None:
    """If this fails, [data] dataset = 'gcide' is refused or takes a backbone it cannot read."""
    head = {"encoder": "mlp", "hidden": []}
    config = parse_config({"data": {"source": "locked", "dataset": "gcide"}, "model": head}, source="test")
    assert config.data.source == "locked" and config.data.dataset == "gcide"
    with pytest.raises(ValueError, match="pixels"):
        parse_config(
            {"data": {"source": "locked", "dataset": "gcide", "backbone": "pixels"}, "model": head},
            source="test",
        )


@pytest.mark.skipif(not (GCIDE_ROOT / "gcide.index").is_file(), reason="dict-gcide is not installed")
def test_the_installed_dictionary_splits_by_headword() -> None:
    """If this fails, the installed GCIDE gives another number of pairs than docs state, or a headword's senses
    fall in two splits (test queries whose headword was trained on)."""
    fractions = SplitFractions(0.05, 0.05, 0)
    train = load_split("gcide", "train", fractions)
    test = load_split("gcide", "test", fractions)
    assert len(train) + len(test) + len(load_split("gcide", "val", fractions)) == 154_354
    assert not {p.group for p in train} & {p.group for p in test}
    assert len(train) > 130_000
