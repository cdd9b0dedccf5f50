r"""Lines of a text file as crl reads them: split at "\n" only, so characters that are line breaks to Unicode
(U+2028, U+2029, U+0085, form feeds) stay text inside their line, as JSON allows them, and a file whose lines are
items keeps item i on line i + 1. A byte order mark opening the text (U+FEFF, which some editors write at the start
of a UTF-8 file) marks the encoding, not text: it is dropped, never kept in the first line's item.
"""

__all__ = ["BOM", "lines_of_items", "split_lines"]

BOM = "\ufeff"
"""The byte order mark, as a UTF-8 file that opens with one decodes it."""


def split_lines(text: str) -> list[str]:
    r"""The lines of ``text``, split at "\n" only (a "\r" before it dropped): U+2028, U+0085 and the other
    characters ``str.splitlines`` breaks at stay inside their line. A final "\n" ends the last line; it starts
    no empty one. A :data:`BOM` opening ``text`` is dropped."""
    lines = text.removeprefix(BOM).split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def lines_of_items(text: str, where: str) -> list[str]:
    """The lines of ``text`` (:func:`split_lines`), one item each: item i is line i + 1.

    Raises:
        ValueError: naming ``where`` and the line, for a blank line (skipping it would shift every later item's id
            against its line number).
    """
    lines = split_lines(text)
    blank = next((number for number, line in enumerate(lines, start=1) if not line.strip()), None)
    if blank is not None:
        raise ValueError(
            f"{where}:{blank} is blank; each line is one item (item i is line i + 1), so remove the line or give "
            "it text"
        )
    return lines
