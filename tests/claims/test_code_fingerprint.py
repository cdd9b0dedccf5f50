"""A claim's cells are namespaced by the code its module imports: an edit there invalidates them, an edit elsewhere
does not (so a long run resumes), and the static import closure covers everything the module loads at run time."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from crl.claims import ClaimContext, Fidelity
from crl.claims.context import code_fingerprint, files_fingerprint, import_closure
from crl.claims.registry import default_registry
from crl.sweep import Cell, SweepStore

CRL_ROOT = Path(importlib.import_module("crl").__file__).resolve().parent  # type: ignore[arg-type]


def _package(root: Path, files: dict[str, str]) -> Path:
    """Write a package ``pkg`` under ``root`` from {relative path: source}; return its directory."""
    for relative, source in files.items():
        path = root / "pkg" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root / "pkg"


def test_closure_follows_absolute_relative_nested_and_from_imports(tmp_path: Path) -> None:
    """If this fails, a claim's fingerprint would miss code it runs (stale cells reused) or add code it does not."""
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "import pkg.b\nfrom pkg.sub import c\n\ndef f():\n    from .d import g\n",
            "b.py": "",
            "sub/__init__.py": "from pkg.sub.e import h\n",
            "sub/c.py": "",
            "sub/e.py": "import os\n",
            "d.py": "",
            "unrelated.py": "import pkg.a\n",
        },
    )
    names = {str(path.relative_to(pkg)) for path in import_closure("pkg.a", pkg)}
    assert names == {"__init__.py", "a.py", "b.py", "sub/__init__.py", "sub/c.py", "sub/e.py", "d.py"}


def _runtime_crl_files(module: str) -> set[Path]:
    """The crl source files a fresh interpreter has loaded after importing ``module``."""
    code = (
        "import importlib, sys\n"
        f"importlib.import_module({module!r})\n"
        "for name, mod in sorted(sys.modules.items()):\n"
        "    if name == 'crl' or name.startswith('crl.'):\n"
        "        print(getattr(mod, '__file__', None) or '')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {Path(line).resolve() for line in out.splitlines() if line}


@pytest.mark.parametrize("claim", [claim for claim in default_registry().claims if claim.id in {"C2", "C6"}])
def test_static_closure_covers_what_a_claim_module_loads(claim) -> None:
    """If this fails, some code a claim runs is outside its fingerprint; C6 (few imports) and C2 (the objectives)."""
    module = type(claim).__module__
    static = set(import_closure(module, CRL_ROOT))
    assert _runtime_crl_files(module) <= static
    assert CRL_ROOT / "claims" / "c10_generalisation.py" not in static


def test_fingerprint_moves_with_the_closure_only(tmp_path: Path) -> None:
    """If this fails, an edit to unrelated code would stop a claim run from resuming, or an edit to its own code would
    let it reuse stale cells."""
    pkg = _package(
        tmp_path, {"__init__.py": "", "claim.py": "import pkg.used\n", "used.py": "x = 1\n", "other.py": ""}
    )

    def fingerprint() -> str:
        return files_fingerprint(import_closure("pkg.claim", pkg), pkg)

    first = fingerprint()
    (pkg / "other.py").write_text("y = 2\n")
    assert fingerprint() == first
    (pkg / "used.py").write_text("x = 2\n")
    assert fingerprint() != first


def test_context_namespaces_cells_by_its_module(tmp_path: Path) -> None:
    """If this fails, `crl verify` would not store a claim's cells under its own module's fingerprint."""
    module = "crl.claims.c06_saturation"
    with SweepStore(tmp_path / "r.sqlite") as store:
        ctx = ClaimContext("C6", Fidelity.QUICK, store, seed=0, run_id="run", level=0.99, module=module)
        ctx.run_cells([Cell({"i": 0}, 0)], lambda cell: {"v": 1.0})
        assert len(store.records(f"C6@{code_fingerprint(module)}")) == 1
        assert store.records(f"C6@{code_fingerprint()}") == []
