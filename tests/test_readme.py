"""The README's examples run as written: the library example (if this fails, the README shows an API crl no longer
has), the arrays example's data file, made the same way by the README and by its config's comment, and the tour's
text-search block, line by line."""

import json
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from crl.commands import app

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_library_example_runs_and_gives_finite_gradients(one_thread: None) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "README.md has no python example"
    scope: dict[str, object] = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    a, tau = scope["a"], scope["tau"]
    assert isinstance(a, torch.Tensor) and a.grad is not None and bool(torch.isfinite(a.grad).all())
    assert tau.log_inverse.grad is not None  # type: ignore[attr-defined]


CONFIG = README.parent / "configs" / "arrays_example.toml"


def _make_pairs(code: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, np.ndarray]:
    folder.mkdir()
    monkeypatch.chdir(folder)
    exec(compile(code, str(folder), "exec"), {})
    with np.load(folder / "pairs.npz") as arrays:
        return {key: arrays[key] for key in arrays.files}


def test_the_arrays_example_makes_the_same_file_in_the_readme_and_its_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's step 1 and configs/arrays_example.toml's comment once disagreed (noise 1.5 against 0.1, seeded
    against not): a user following either must get the same pairs.npz."""
    readme = re.search(
        r"# 1\. a toy data set.*?\npython -c \"\n(.*?)\n\"", README.read_text(), flags=re.DOTALL
    )
    config = re.search(r'^#   python -c "(.*)"$', CONFIG.read_text(), flags=re.MULTILINE)
    assert readme is not None and config is not None
    from_readme = _make_pairs(readme.group(1), tmp_path / "readme", monkeypatch)
    from_config = _make_pairs(config.group(1), tmp_path / "config", monkeypatch)
    assert set(from_readme) == set(from_config) == {"x", "y", "label"}
    for key, array in from_readme.items():
        np.testing.assert_array_equal(array, from_config[key])
    noise = from_readme["y"] - from_readme["x"]
    assert abs(float(noise.std()) - 1.5) < 0.01


def _tour_text_block() -> list[str]:
    """The commands of the tour's "Search texts" block as printed, one per line, their comments cut off."""
    section = README.read_text().split("### Search texts", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    assert block is not None, "README.md's tour has no text-search block"
    return [re.sub(r"\s+#\s.*$", "", line) for line in block.group(1).splitlines() if line.strip()]


def _free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _st_ranking(corpus: list[str], query: str) -> tuple[list[int], np.ndarray, np.ndarray]:
    """sentence-transformers' own ranking of ``corpus`` for ``query`` (ids best first, their cosines), and the
    query's embedding: the reference the tour's comments describe."""
    from sentence_transformers import SentenceTransformer

    from crl.models.minilm import packaged_model_path

    model = SentenceTransformer(str(packaged_model_path()), device="cpu")
    documents, asked = model.encode(corpus), model.encode([query])
    cosines = documents @ asked[0]
    order = [int(i) for i in np.argsort(-cosines, kind="stable")]
    return order, cosines[order], asked


@pytest.mark.slow
def test_the_tours_text_search_block_runs_as_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line of the tour's text-search block runs in an empty folder as printed (crl lines through the app,
    `crl serve ... &`, its wait and curl in a shell, once each, on a free port in place of 8000), and says what
    its comment says, by sentence-transformers' own encode: if this fails, a user copying the tour meets an
    error (as `crl search idx/text 1984 --text` once did, k = 10 on 5 items, or a curl pasted before the server
    answered) or a comment that is not true."""
    monkeypatch.chdir(tmp_path)
    port = str(_free_port())
    outputs: dict[str, str] = {}
    server: subprocess.Popen[bytes] | None = None
    try:
        for line in _tour_text_block():
            if line.startswith("crl serve"):
                assert line.endswith("&") and "--port 8000" in line
                words = shlex.split(line.rstrip("&").replace("--port 8000", f"--port {port}"))
                command = [sys.executable, "-m", "crl", *words[1:]]
                server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            elif line.startswith("curl"):
                assert server is not None, "the block curls before it serves"
                local = line.replace("localhost:8000", f"localhost:{port}")
                answered = subprocess.run(["bash", "-c", local], capture_output=True, text=True, check=False)
                assert answered.returncode == 0 and answered.stdout, (
                    "the block's wait ends before the server answers"
                )
                outputs["curl"] = answered.stdout
            elif line.startswith("crl "):
                result = CliRunner().invoke(app, shlex.split(line)[1:])
                assert result.exit_code == 0, f"{line}\n{result.output}"
                outputs[line] = result.stdout
            else:
                local = line.replace("localhost:8000", f"localhost:{port}")
                subprocess.run(["bash", "-c", local], check=True, timeout=180)
                assert "localhost" not in line or server is not None, "the block waits before it serves"
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    corpus = Path("corpus.txt").read_text().splitlines()
    order, cosines, water = _st_ranking(corpus, "a large body of water")
    assert [corpus[i] for i in order[:2]] == ["a large expanse of sea", "sea, ocean"]
    table = outputs['crl search idx/text "a large body of water" -k 3']
    assert table.index(corpus[order[0]]) < table.index(corpus[order[1]]) < table.index(corpus[order[2]])
    answer = json.loads(outputs["curl"])["results"][0]
    assert answer["ids"] == order[:2] and answer["texts"] == [corpus[i] for i in order[:2]]
    np.testing.assert_allclose(answer["scores"], cosines[:2], atol=1e-5)
    np.testing.assert_allclose(np.load("x.npy"), water, atol=1e-5)
    assert outputs["crl search idx/text 1984 --text"].count('{"text": ') == len(corpus)


@pytest.mark.parametrize(
    "written",
    [
        "milvus-data/server.json",
        "advise/advice.json",
        "idx/text/index.faiss",
        "corpus.txt",
        "pairs.npz",
        "x.npy",
        "vectors.npy",
    ],
)
def test_what_the_readme_writes_into_the_root_is_git_ignored(written: str) -> None:
    """The README's commands write these into the repository's root (crl milvus start --dir milvus-data, crl
    advise --out advise, the tour's files); git must not offer them for a commit, while crl's own advise package
    stays tracked."""
    root = README.parent
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    checked = subprocess.run(["git", "check-ignore", "-q", written], cwd=root, check=False)
    assert checked.returncode == 0, f"{written} is not ignored by .gitignore"
    tracked = subprocess.run(
        ["git", "check-ignore", "-q", "src/crl/advise/__init__.py"], cwd=root, check=False
    )
    assert tracked.returncode == 1
