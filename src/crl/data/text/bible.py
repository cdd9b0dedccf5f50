"""KJV <-> WEB verse pairs from Debian's SWORD modules (``sword-text-kjv``, ``sword-text-web``).

The two Bibles number verses differently (KJV and NRSVA versifications), so the pairing comes from SWORD itself:
a one-time export (:mod:`crl.data.text._sword_export`, run by ``make data`` or on first use) walks the KJV verses
under ``/usr/bin/python3`` with Debian's ``python3-sword`` and asks the WEB module for the same verse. The table is
cached as ``bible.json`` in the cache folder (``$CRL_CACHE_DIR``, default ``~/.cache/crl``).

Pairs: x = the KJV verse (archaic English), y = the WEB verse (modern English), grouped by chapter
(``Gen.1``), so a chapter is never split between train and test. Markup is stripped: notes and titles removed,
tags dropped, whitespace joined.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from crl._cache import default_cache_dir
from crl.data.text.pairs import TextPair

__all__ = ["SWORD_MODULES", "bible_pairs", "default_cache_dir", "export_bible", "strip_osis"]

SWORD_MODULES = Path("/usr/share/sword/modules/texts/ztext")
_PACKAGES = {"engKJV2006eb": "sword-text-kjv", "engWEB2015eb": "sword-text-web"}
_SYSTEM_PYTHON = "/usr/bin/python3"
_NOTES = re.compile(r"<note\b.*?</note>|<title\b.*?</title>", re.S)
_TAGS = re.compile(r"<[^>]+>")
_APPENDIX = re.compile(r'<div\b[^>]*type="glossary".*', re.S)
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([,.;:!?])")


def strip_osis(raw: str) -> str:
    """Plain text of one verse's OSIS markup: notes and titles removed, tags replaced by spaces, spaces joined,
    and an appended glossary (the WEB's after Revelation 22:21) cut off."""
    text = _TAGS.sub(" ", _NOTES.sub(" ", _APPENDIX.sub("", raw)))
    return _SPACE_BEFORE_PUNCTUATION.sub(r"\1", " ".join(text.split())).strip()


def _check_installed() -> None:
    """Raise a ValueError naming the Debian packages to install when a SWORD module or the bindings are missing."""
    missing = [package for module, package in _PACKAGES.items() if not (SWORD_MODULES / module).is_dir()]
    if (
        not Path(_SYSTEM_PYTHON).is_file()
        or subprocess.run([_SYSTEM_PYTHON, "-c", "import Sword"], capture_output=True, check=False).returncode
    ):
        missing.append("python3-sword")
    if missing:
        raise ValueError(
            f"the Bible pairs need the Debian packages {', '.join(missing)}; install them with "
            f"apt-get install {' '.join(missing)} (make data does this where apt-get works)"
        )


def export_bible(cache_dir: Path | None = None) -> Path:
    """Export the verse table once (:mod:`crl.data.text._sword_export` under /usr/bin/python3); the cached file.

    Raises:
        ValueError: if a Debian package is missing (naming it) or the export fails (with its message).
    """
    folder = cache_dir if cache_dir is not None else default_cache_dir()
    target = folder / "bible.json"
    if target.is_file():
        return target
    _check_installed()
    folder.mkdir(parents=True, exist_ok=True)
    script = Path(__file__).with_name("_sword_export.py")
    done = subprocess.run(
        [_SYSTEM_PYTHON, str(script), str(target)], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise ValueError(f"the SWORD export failed: {done.stderr.strip().splitlines()[-1:]}")
    return target


def bible_pairs(cache_dir: Path | None = None) -> list[TextPair]:
    """KJV -> WEB verse pairs (both verses non-empty), grouped by chapter.

    Raises:
        ValueError: if the export cannot run (a missing Debian package, named) or the cache is not valid JSON.
    """
    path = export_bible(cache_dir)
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: a damaged Bible cache ({error}); delete it to export again") from None
    pairs = []
    for reference, kjv_raw, web_raw in table["verses"]:
        kjv, web = strip_osis(kjv_raw), strip_osis(web_raw)
        if kjv and web:
            pairs.append(TextPair(kjv, web, reference.rsplit(".", 1)[0]))
    return pairs
