"""crl's cache folder: exported corpora (:mod:`crl.data.text.bible`) and built native code
(:mod:`crl.objectives._native`)."""

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """``$CRL_CACHE_DIR``, else ``~/.cache/crl``."""
    return Path(os.environ.get("CRL_CACHE_DIR", Path.home() / ".cache" / "crl"))
