"""The tiny synthetic-truth config every ``crl advise`` command test runs (``config``: written to a temporary file)."""

from pathlib import Path

import pytest

CONFIG = """
[data]
source = "synthetic"
truth = "vmf"
dim = 4
kappa = 5.0
n_train = 512
batch_size = 16

[model]
encoder = "mlp"
hidden = [8]
embedding_dim = 4

[loss]
negatives = "shared_pool"
n_negatives = 8
tau = 0.2

[optim]
lr = 0.01
total_steps = 10
warmup_steps = 2
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path
