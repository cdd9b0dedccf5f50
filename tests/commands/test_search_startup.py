"""``crl search IDX ID`` on a saved index loads only what a query by id needs (the issue: 3 s on an idle machine,
where ``crl --help`` took 0.3 s, because it imported torch and scipy to look up a stored vector).

If this fails, an import on the path of a query by id (crl.search, crl.serving.queries, crl.commands) pulls torch
or scipy back in: benchmarks/startup.py shows what it costs. Timing itself is not tested (it depends on the load).
"""

import json
import subprocess
import sys
from pathlib import Path

import crl

_SEARCH = """
import json, sys
from crl.commands import app
try:
    app(["search", sys.argv[1], "17", "-k", "3", "--json"])
except SystemExit as done:
    status = done.code
heavy = sorted(name for name in ("torch", "scipy", "transformers", "sklearn") if name in sys.modules)
print(json.dumps({"status": status, "heavy": heavy}), file=sys.stderr)
"""


def test_a_query_by_id_of_a_saved_index_loads_neither_torch_nor_scipy(tmp_path: Path) -> None:
    folder = tmp_path / "idx"
    build = (
        "import sys, numpy as np; from crl.search import Index; "
        "Index.build(np.random.default_rng(0).normal(size=(1000, 64)).astype('float32'), None, 'flat', 'cosine')"
        ".save(sys.argv[1])"
    )
    source = str(Path(crl.__file__).resolve().parents[1])
    environment = {"PYTHONPATH": source, "PATH": "/usr/bin:/bin"}
    built = subprocess.run(
        [sys.executable, "-c", build, str(folder)], env=environment, capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr
    answer = subprocess.run(
        [sys.executable, "-c", _SEARCH, str(folder)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(answer.stderr.strip().splitlines()[-1])
    assert report == {"status": 0, "heavy": []}, answer.stderr
    results = json.loads(answer.stdout)["results"]
    assert len(results) == 3 and 17 not in [hit["id"] for hit in results]
