"""The README's examples run as written: the library example (if this fails, the README shows an API crl no longer
has), and the arrays example's data file, made the same way by the README and by its config's comment."""

import re
from pathlib import Path

import numpy as np
import pytest
import torch

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
