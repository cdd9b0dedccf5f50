"""The README's library example runs as written (if this fails, the README shows an API crl no longer has)."""

import re
from pathlib import Path

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
