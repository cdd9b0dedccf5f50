"""What the studies' command lines share: a parser whose errors are one line, the checks of their numbers, and the
reading of the JSON documents one step writes for another (a study's predictions, its score).

Every bad input ends as ``python -m STUDY: error: ...`` on stderr and exit status 2, naming the argument or the
file and the fix, as the crl commands do; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn


class OneLineParser(argparse.ArgumentParser):
    """argparse with errors on one line (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``low`` (argparse names the argument in its error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
        return value

    return parse


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def json_object(path: Path, made_by: str) -> dict[str, Any]:
    """The JSON object in ``path``, which the command ``made_by`` writes.

    Raises:
        ValueError: naming the file and ``made_by``, when it is missing, not JSON or not an object.
    """
    if not path.is_file():
        raise ValueError(f"{path} does not exist; write it first: {made_by}")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not JSON ({error}); write it again: {made_by}") from None
    if not isinstance(document, dict):
        raise ValueError(
            f"{path} holds a {type(document).__name__}, not a JSON object; write it again: {made_by}"
        )
    return document


def numbers_of(document: dict[str, Any], names: Sequence[str], where: str, made_by: str) -> None:
    """Check that ``document`` (at ``where``, e.g. ``"predictions.json points[3]"``) holds each of ``names`` as a
    finite number (a bool counts: it is a flag).

    Raises:
        ValueError: naming ``where``, the first missing or malformed field and ``made_by``.
    """
    for name in names:
        value = document.get(name)
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(
                f"{where}: field {name!r} is {value!r}, not a finite number; write the file again: {made_by}"
            )


def rows_of(
    document: dict[str, Any], key: str, fields: Sequence[str], path: Path, made_by: str
) -> list[dict]:
    """``document[key]``: a list of objects, each holding ``fields`` as finite numbers (:func:`numbers_of`).

    Raises:
        ValueError: naming the file, the row and the field, when ``key`` is not such a list.
    """
    rows = document.get(key)
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ValueError(f"{path}: field {key!r} is not a list of objects; write the file again: {made_by}")
    for position, row in enumerate(rows):
        numbers_of(row, fields, f"{path} {key}[{position}]", made_by)
    return rows


def write_outputs(
    out_md: Path | None, out_json: Path | None, header: Sequence[str], lines: Sequence[str], document: Any
) -> None:
    """Write a study's Markdown (``header`` then ``lines``) and its JSON document where their paths are given."""
    if out_md is not None:
        out_md.write_text("\n".join([*header, *lines, ""]), encoding="utf-8")
    if out_json is not None:
        out_json.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def report_main(
    prog: str,
    description: str,
    header: Sequence[str],
    report: Callable[[], tuple[list[str], Any]],
    argv: Sequence[str] | None = None,
) -> None:
    """The command line of a study that reads committed folders into one report: print ``report()``'s Markdown lines
    and write them (after ``header``) and its JSON document where ``--out-md`` and ``--out-json`` say; a ValueError
    of ``report`` ends as the parser's one-line error."""
    parser = OneLineParser(prog=prog, description=description)
    parser.add_argument("--out-md", type=Path, default=None, help="write the Markdown here")
    parser.add_argument("--out-json", type=Path, default=None, help="write the JSON document here")
    args = parser.parse_args(argv)
    try:
        lines, document = report()
    except ValueError as error:
        parser.error(str(error))
    print("\n".join(lines))
    write_outputs(args.out_md, args.out_json, header, lines, document)
