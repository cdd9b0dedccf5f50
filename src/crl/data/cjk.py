"""CJK glyph <-> English gloss pairs: the image of one character, rendered with a CJK font, and its Unihan
``kDefinition`` (Debian ``unicode-data`` and ``fonts-wqy-zenhei``).

Source: ``Unihan_Readings.txt(.bz2)``, lines ``U+XXXX<TAB>kDefinition<TAB>gloss``; the font is WenQuanYi Zen Hei
(face 0 of ``wqy-zenhei.ttc``).

Rendering (:func:`render_glyph`): the character in black (0) on white (255), font size :data:`FONT_SIZE` px,
centred on its metrics (anchor "mm") in a 224x224 grey-scale image; the backbone reads it as RGB (three equal
channels).

The rules, in order (each one's drops are counted in :class:`CjkCounts`):

1. **Variant pointer** (:func:`pointer_only`): the gloss is split into clauses at ``, ; :`` and parentheses; a
   clause is a *pointer* when it names another character (a CJK ideograph, a code ``U+XXXX`` or ``Kangxi radical
   N``) and its other words are all of :data:`POINTER_WORDS` ("same as", "variant of", "ancient form of", ...). A
   gloss whose non-empty clauses are all pointers ("same as U+879A 螚", "variant of Kangxi radical 146", "(simplified
   form of 𨊰[U+282b0])") is dropped; a gloss with any other clause ("(same as U+4E18 丘) hillock or mound") is kept
   verbatim.
2. **Not rendered**: a character whose image equals the font's .notdef (tofu) glyph, the rendering of the
   private-use U+E000 that the font lacks, is dropped; so is one that renders without ink (a blank image).
3. **Duplicates**: pairs with an identical (glyph image, gloss) are kept once (the first by code point).

Pairs: x = the glyph image, y = the gloss, in code-point order. Split (:func:`split_glyph_pairs`): by character,
with :func:`crl.data.text.split_pairs` on each pair's text view (:meth:`GlyphPair.text_pair`: query = the image's
SHA-256, positive = the gloss, group = the character), so characters whose images are identical share a split.
Keys (:func:`glyph_keys`): pairs sharing an image or a gloss share one, so they are never each other's negatives.
"""

from __future__ import annotations

import bz2
import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont
from torch import Tensor

from crl.data.text import Split, SplitFractions, TextPair, item_ids, split_pairs

__all__ = [
    "CJK_FONT",
    "FONT_SIZE",
    "GLYPH_SIZE",
    "NOTDEF_PROBE",
    "POINTER_WORDS",
    "UNIHAN_READINGS",
    "CjkCounts",
    "CjkData",
    "GlyphPair",
    "cjk_data",
    "cjk_font",
    "glyph_images",
    "glyph_keys",
    "glyph_pixels",
    "load_font",
    "parse_definitions",
    "pointer_only",
    "render_glyph",
    "select_pairs",
    "split_glyph_pairs",
]

UNIHAN_READINGS = Path("/usr/share/unicode/Unihan_Readings.txt.bz2")
"""Unihan's readings and definitions (Debian ``unicode-data``)."""

CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")
"""WenQuanYi Zen Hei (Debian ``fonts-wqy-zenhei``); face 0 is read."""

GLYPH_SIZE = 224
"""Pixels per side of a glyph image (EfficientNet-Lite0's input)."""

FONT_SIZE = 168
"""The font size in pixels: 3/4 of the image, so a full-width ideograph's ink fits with a margin."""

NOTDEF_PROBE = "\ue000"
"""A private-use character the font lacks: its rendering is the font's .notdef (tofu) glyph."""

_POINTER_VOCABULARY = (
    "same as variant variants form forms of a an the ancient old archaic simplified traditional standard "
    "non-standard nonstandard non-classical classical corrupted alternate alternative abbreviated abbreviation "
    "obsolete vulgar questionable or and used for see also interchangeable with j k cant."
)
POINTER_WORDS = frozenset(_POINTER_VOCABULARY.split())
"""The words a pointer clause may hold beside the characters it names (rule 1 of the module docstring)."""

_REFERENCE = re.compile(
    r"\[?U\+[0-9A-Fa-f]{4,6}\]?|Kangxi radical \d+|[\u2e80-\u2fdf\u3005\u3007\u3021-\u3029\u31c0-\u31ef"
    r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]"
)
_CLAUSES = re.compile(r"[,;:()]")
_FIELD = "kDefinition"


@dataclass(frozen=True)
class GlyphPair:
    """One pair: the character (x, rendered), its gloss (y), and the SHA-256 of its rendered image."""

    character: str
    gloss: str
    glyph_sha256: str

    def text_pair(self) -> TextPair:
        """The pair's view for the text splits and keys: query = the image's SHA-256, positive = the gloss,
        group = the character."""
        return TextPair(self.glyph_sha256, self.gloss, self.character)


@dataclass(frozen=True)
class CjkCounts:
    """How many definitions each rule of the module docstring dropped, and the pairs left."""

    definitions: int
    pointer_only: int
    tofu: int
    blank: int
    duplicates: int
    pairs: int


@dataclass(frozen=True)
class CjkData:
    """The pairs of the whole set, in code-point order, and the counts of the rules."""

    pairs: tuple[GlyphPair, ...]
    counts: CjkCounts


def parse_definitions(lines: Iterable[str]) -> list[tuple[str, str]]:
    """(character, gloss) of each ``U+XXXX<TAB>kDefinition<TAB>gloss`` line, in file order; comments, blank lines
    and other fields are skipped.

    Raises:
        ValueError: naming the line when a kDefinition line's code point is not ``U+`` and hex digits.
    """
    found = []
    for number, line in enumerate(lines, 1):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 3 or parts[1] != _FIELD:
            continue
        code, _, gloss = parts
        if not re.fullmatch(r"U\+[0-9A-Fa-f]{4,6}", code):
            raise ValueError(
                f"Unihan line {number}: {code!r} is not a code point U+XXXX; pass Unihan_Readings.txt"
            )
        found.append((chr(int(code[2:], 16)), gloss.strip()))
    return found


def _pointer_clause(clause: str) -> bool:
    """A clause naming another character with only :data:`POINTER_WORDS` beside it."""
    if not _REFERENCE.search(clause):
        return False
    words = _REFERENCE.sub(" ", clause).replace("'", " ").lower().split()
    return all(word in POINTER_WORDS for word in words)


def pointer_only(gloss: str) -> bool:
    """Whether the gloss is only a variant pointer (rule 1 of the module docstring)."""
    clauses = [clause.strip() for clause in _CLAUSES.split(gloss) if clause.strip()]
    return bool(clauses) and all(_pointer_clause(clause) for clause in clauses)


def load_font(path: str | Path = CJK_FONT) -> ImageFont.FreeTypeFont:
    """Face 0 of the font file at :data:`FONT_SIZE` px.

    Raises:
        ValueError: naming the Debian package when the file is missing.
    """
    file = Path(path)
    if not file.is_file():
        raise ValueError(
            f"no CJK font at {file}; install the Debian package with apt-get install fonts-wqy-zenhei "
            "(make data does this where apt-get works), or set [data] root to a folder holding wqy-zenhei.ttc"
        )
    return ImageFont.truetype(str(file), FONT_SIZE, index=0)


def render_glyph(font: ImageFont.FreeTypeFont, character: str) -> np.ndarray:
    """(224, 224) uint8: the character in black on white, centred on its metrics (module docstring)."""
    image = Image.new("L", (GLYPH_SIZE, GLYPH_SIZE), 255)
    ImageDraw.Draw(image).text((GLYPH_SIZE / 2, GLYPH_SIZE / 2), character, font=font, fill=0, anchor="mm")
    return np.asarray(image)


def glyph_pixels(font: ImageFont.FreeTypeFont, characters: Sequence[str]) -> Tensor:
    """(N, 3, 224, 224) uint8 RGB images of the characters (three equal channels)."""
    grey = np.stack([render_glyph(font, character) for character in characters])
    return torch.from_numpy(grey).unsqueeze(1).expand(-1, 3, -1, -1).contiguous()


def select_pairs(definitions: Sequence[tuple[str, str]], font: ImageFont.FreeTypeFont) -> CjkData:
    """The pairs the rules of the module docstring keep from (character, gloss) definitions, and their counts."""
    tofu = render_glyph(font, NOTDEF_PROBE).tobytes()
    dropped = {"pointer_only": 0, "tofu": 0, "blank": 0, "duplicates": 0}
    seen: set[tuple[str, str]] = set()
    pairs = []
    for character, gloss in sorted(definitions, key=lambda item: ord(item[0])):
        if pointer_only(gloss):
            dropped["pointer_only"] += 1
            continue
        image = render_glyph(font, character)
        if image.tobytes() == tofu:
            dropped["tofu"] += 1
            continue
        if image.min() == 255:
            dropped["blank"] += 1
            continue
        digest = hashlib.sha256(image.tobytes()).hexdigest()
        if (digest, gloss) in seen:
            dropped["duplicates"] += 1
            continue
        seen.add((digest, gloss))
        pairs.append(GlyphPair(character, gloss, digest))
    counts = CjkCounts(len(definitions), pairs=len(pairs), **dropped)
    return CjkData(tuple(pairs), counts)


def _readings_file(root: str) -> Path:
    """Unihan_Readings.txt.bz2 (or .txt) in ``root``, or :data:`UNIHAN_READINGS` for ''."""
    if not root:
        return UNIHAN_READINGS
    folder = Path(root)
    packed = folder / "Unihan_Readings.txt.bz2"
    return packed if packed.is_file() else folder / "Unihan_Readings.txt"


@functools.lru_cache(maxsize=2)
def cjk_font(root: str = "") -> ImageFont.FreeTypeFont:
    """The font of the set: ``wqy-zenhei.ttc`` in ``root``, or :data:`CJK_FONT` for '' (:func:`load_font`)."""
    return load_font(Path(root) / CJK_FONT.name if root else CJK_FONT)


def glyph_images(characters: Sequence[str], root: str = "") -> Tensor:
    """(N, 3, 224, 224) uint8 RGB glyph images of the characters in the set's font (:func:`cjk_font`)."""
    return glyph_pixels(cjk_font(root), characters)


@functools.lru_cache(maxsize=2)
def cjk_data(root: str = "") -> CjkData:
    """Every pair of the set and the counts of its rules, from ``root`` (a folder holding
    ``Unihan_Readings.txt(.bz2)`` and ``wqy-zenhei.ttc``; '': the Debian packages' files); kept for the process.

    Raises:
        ValueError: naming the Debian package when the Unihan file or the font is missing.
    """
    readings = _readings_file(root)
    font = cjk_font(root)
    if not readings.is_file():
        raise ValueError(
            f"no Unihan readings at {readings}; install the Debian package with apt-get install unicode-data "
            "(make data does this where apt-get works), or set [data] root to a folder holding Unihan_Readings.txt"
        )
    opener = bz2.open if readings.suffix == ".bz2" else open
    with opener(readings, "rt", encoding="utf-8") as handle:
        definitions = parse_definitions(handle)
    return select_pairs(definitions, font)


def split_glyph_pairs(pairs: Sequence[GlyphPair], fractions: SplitFractions) -> dict[Split, list[GlyphPair]]:
    """Train/val/test pairs by character, characters with identical images together (module docstring).

    Raises:
        ValueError: if there are no pairs.
    """
    by_view = {pair.text_pair(): pair for pair in pairs}
    split = split_pairs(list(by_view), fractions)
    return {name: [by_view[view] for view in views] for name, views in split.items()}


def glyph_keys(pairs: Sequence[GlyphPair]) -> Tensor:
    """(n,) int64 item keys: pairs sharing an image or a gloss share one."""
    return item_ids([pair.text_pair() for pair in pairs])
