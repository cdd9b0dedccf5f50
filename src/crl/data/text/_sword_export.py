"""One-time export of the KJV and WEB Bibles, verse by verse, through Debian's SWORD bindings.

Run under the system interpreter (``/usr/bin/python3``, where ``python3-sword`` installs ``import Sword``), not the
project's virtual environment: ``/usr/bin/python3 src/crl/data/text/_sword_export.py OUT.json``. It walks every
verse of the KJV versification and asks the WEB module (NRSVA versification) for the same verse: SWORD maps the key
between the two versifications, which a join on reference strings would not. The output is JSON,
``{"modules": [kjv, web], "verses": [[osis_ref, kjv_raw, web_raw], ...]}``, with the modules' raw OSIS markup
(crl.data.text.bible strips it). This file imports only the standard library and Sword.
"""

import json
import os
import sys

KJV_MODULE = "engKJV2006eb"
WEB_MODULE = "engWEB2015eb"


def export(out_path: str) -> int:
    """Write the verse table to ``out_path`` (atomically) and return the number of verses."""
    # Deferred: Sword is Debian's python3-sword, importable only by the system Python this script runs under.
    import Sword

    manager = Sword.SWMgr()
    kjv, web = manager.getModule(KJV_MODULE), manager.getModule(WEB_MODULE)
    if kjv is None or web is None:
        missing = [name for name, module in ((KJV_MODULE, kjv), (WEB_MODULE, web)) if module is None]
        raise SystemExit(
            f"SWORD modules {missing} are not installed (apt-get install sword-text-kjv sword-text-web)"
        )
    key = Sword.VerseKey()
    key.setVersificationSystem(kjv.getConfigEntry("Versification"))
    key.setText("Genesis 1:1")
    verses = []
    while True:
        kjv.setKey(key)
        kjv_raw = kjv.getRawEntry()
        web.setKey(key)
        verses.append([key.getOSISRef(), kjv_raw, web.getRawEntry()])
        key.increment()
        if ord(key.popError()):
            break
    temporary = out_path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump({"modules": [KJV_MODULE, WEB_MODULE], "verses": verses}, handle, ensure_ascii=False)
    os.replace(temporary, out_path)
    return len(verses)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: /usr/bin/python3 _sword_export.py OUT.json")
    print(f"exported {export(sys.argv[1])} verses to {sys.argv[1]}")
