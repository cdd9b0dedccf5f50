"""CJK glyph <-> gloss pairs: the Unihan reader, the variant-pointer, tofu, blank and duplicate rules on a small
inline excerpt rendered with the installed WenQuanYi font, the split by character and the keys; the whole set."""

import bz2
from pathlib import Path

import pytest

from crl.data.cjk import (
    CJK_FONT,
    GLYPH_SIZE,
    UNIHAN_READINGS,
    CjkCounts,
    cjk_data,
    glyph_images,
    glyph_keys,
    load_font,
    parse_definitions,
    pointer_only,
    render_glyph,
    select_pairs,
    split_glyph_pairs,
)
from crl.data.text import SplitFractions

needs_font = pytest.mark.skipif(not CJK_FONT.is_file(), reason="fonts-wqy-zenhei is not installed")

EXCERPT = """# Unihan_Readings.txt (an excerpt: real code points, some glosses shortened)
U+4E00\tkDefinition\tone; a, an; alone
U+4E00\tkMandarin\tyī
U+4E03\tkDefinition\tseven
U+4E8C\tkDefinition\ttwo; twice
U+58F1\tkDefinition\tone
U+5F0C\tkDefinition\tone
U+5F0D\tkDefinition\tvariant of U+4E8C 二
U+3405\tkDefinition\t(an ancient form of U+4E94 五) five
U+E001\tkDefinition\ta private-use character the font lacks
U+F9EA\tkDefinition\tleave, depart; go away; separate
U+F907\tkDefinition\tturtle or tortoise; cuckold
U+F908\tkDefinition\tturtle
U+793C\tkDefinition\tsocial custom; manners; courtesy; rites
U+FA18\tkDefinition\tsocial custom; manners; courtesy; rites
"""


def test_the_reader_keeps_kdefinition_lines_in_file_order() -> None:
    definitions = parse_definitions(EXCERPT.splitlines(keepends=True))
    assert definitions[:3] == [("一", "one; a, an; alone"), ("七", "seven"), ("二", "two; twice")]
    assert len(definitions) == 13


def test_a_bad_code_point_names_the_line() -> None:
    with pytest.raises(ValueError, match="Unihan line 2: 'X\\+4E00' is not a code point"):
        parse_definitions(["# comment\n", "X+4E00\tkDefinition\tone\n"])


@pytest.mark.parametrize(
    "gloss",
    [
        "variant of U+4E8C 二",
        "same as U+734C 獌 or U+8C99 貙",
        "(simplified form of 𨊰[U+282b0])",
        "Variant of U+571F 土",
        "variant of Kangxi radical 146",
        "ancient form of 巨",
        "used for U+53EA 只",
    ],
)
def test_a_gloss_that_only_points_at_another_character_is_a_pointer(gloss: str) -> None:
    assert pointer_only(gloss)


@pytest.mark.parametrize(
    "gloss",
    [
        "(same as U+4E18 丘) hillock or mound",
        "variant of 緡 U+7DE1, a fishing-line; cord",
        "ancient form of 五 'five'",
        "surname",
        "(J) non-standard form of U+559C 喜, to like, love, enjoy",
        "wheat, barley, oats; simplified form of Kangxi radical 199",
        "",
    ],
)
def test_a_gloss_with_a_meaning_of_its_own_is_kept(gloss: str) -> None:
    assert not pointer_only(gloss)


@needs_font
def test_the_rules_drop_pointers_tofu_blanks_and_duplicates_and_count_them() -> None:
    found = select_pairs(parse_definitions(EXCERPT.splitlines()), load_font())
    assert found.counts == CjkCounts(definitions=13, pointer_only=1, tofu=1, blank=1, duplicates=1, pairs=9)
    characters = [pair.character for pair in found.pairs]
    assert characters == ["㐅", "一", "七", "二", "壱", "弌", "礼", "\uf907", "\uf908"]
    turtle, turtle_only = found.pairs[-2:]
    assert turtle.glyph_sha256 == turtle_only.glyph_sha256 and turtle.gloss != turtle_only.gloss


@needs_font
def test_a_glyph_is_black_on_white_and_tofu_is_the_fonts_notdef() -> None:
    font = load_font()
    one, tofu, other_tofu = (render_glyph(font, c) for c in ("一", "\ue000", "\U000f0000"))
    assert one.shape == (GLYPH_SIZE, GLYPH_SIZE) and one.min() == 0 and one.max() == 255
    assert (tofu == other_tofu).all() and not (one == tofu).all()
    images = glyph_images(["一", "二"])
    assert images.shape == (2, 3, GLYPH_SIZE, GLYPH_SIZE) and (images[:, 0] == images[:, 2]).all()


@needs_font
def test_the_split_is_by_character_deterministic_and_keeps_identical_glyphs_together() -> None:
    pairs = select_pairs(parse_definitions(EXCERPT.splitlines()), load_font()).pairs
    for seed in range(20):
        fractions = SplitFractions(0.3, 0.3, seed)
        split = split_glyph_pairs(pairs, fractions)
        assert split == split_glyph_pairs(pairs, fractions)
        reordered = split_glyph_pairs(pairs[::-1], fractions)
        assert all(set(split[name]) == set(reordered[name]) for name in split)
        side = {pair.character: name for name, part in split.items() for pair in part}
        assert side["\uf907"] == side["\uf908"] and len(side) == len(pairs)


@needs_font
def test_pairs_sharing_a_gloss_or_a_glyph_share_a_key() -> None:
    pairs = select_pairs(parse_definitions(EXCERPT.splitlines()), load_font()).pairs
    keys = dict(zip([pair.character for pair in pairs], glyph_keys(pairs).tolist(), strict=True))
    assert keys["壱"] == keys["弌"] and keys["\uf907"] == keys["\uf908"]
    assert len({keys["一"], keys["七"], keys["二"], keys["壱"], keys["礼"], keys["\uf907"]}) == 6


def test_missing_data_names_the_debian_package(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="apt-get install fonts-wqy-zenhei"):
        load_font(tmp_path / "none.ttc")
    if CJK_FONT.is_file():
        (tmp_path / CJK_FONT.name).symlink_to(CJK_FONT)
        with pytest.raises(ValueError, match="apt-get install unicode-data"):
            cjk_data(str(tmp_path))


@pytest.mark.slow
@pytest.mark.skipif(
    not (CJK_FONT.is_file() and UNIHAN_READINGS.is_file()), reason="unicode-data or fonts-wqy-zenhei missing"
)
def test_the_installed_set_accounts_for_every_definition() -> None:
    found = cjk_data()
    counts = found.counts
    with bz2.open(UNIHAN_READINGS, "rt", encoding="utf-8") as handle:
        assert counts.definitions == sum("\tkDefinition\t" in line for line in handle)
    dropped = counts.pointer_only + counts.tofu + counts.blank + counts.duplicates
    assert dropped + counts.pairs == counts.definitions == len(found.pairs) + dropped
    assert counts.pairs > 20_000 and counts.pointer_only > 0 and counts.tofu > 0
    assert len({(pair.glyph_sha256, pair.gloss) for pair in found.pairs}) == counts.pairs
