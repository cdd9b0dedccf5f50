"""Small configs for the trainer tests (digits halves, or synthetic vMF pairs), written under tmp_path."""

from pathlib import Path
from typing import Any

import torch

from crl.train.config import TrainConfig, load_config, parse_config
from crl.train.trainer import RunResult, Trainer

TINY = Path(__file__).parent / "configs" / "tiny_digits.toml"


_TAGS = {"data": "source", "model": "encoder"}


def tiny_config(tmp_path: Path, name: str, **sections: dict[str, Any]) -> TrainConfig:
    """tests/train/configs/tiny_digits.toml with the run folder under tmp_path and section overrides.

    Overrides that change a section's kind (``source``, ``encoder``) replace the section instead of updating it.
    """
    data = load_config(TINY).model_dump()
    data["run"].update(out_dir=str(tmp_path / "runs"), name=name, tensorboard=False)
    for section, values in sections.items():
        tag = _TAGS.get(section)
        if tag in values and values[tag] != data[section][tag]:
            data[section] = dict(values)
        else:
            data[section].update(values)
    return parse_config(data)


def fit(config: TrainConfig) -> RunResult:
    """Trainer(config).fit(), restoring torch's thread count afterwards (the config sets it)."""
    threads = torch.get_num_threads()
    try:
        return Trainer(config).fit()
    finally:
        torch.set_num_threads(threads)
