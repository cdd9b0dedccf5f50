"""Small configs for the trainer tests (digits halves, synthetic vMF pairs, or text pairs of your own), written under
tmp_path."""

import json
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
    return parse_config(_overridden(data, sections))


def _overridden(document: dict[str, Any], sections: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``document`` with each section updated by ``sections``; a new kind (``source``, ``encoder``) replaces it."""
    for section, values in sections.items():
        tag = _TAGS.get(section)
        current = document.setdefault(section, {})
        if tag in values and values[tag] != current.get(tag):
            document[section] = dict(values)
        else:
            current.update(values)
    return document


def fit(config: TrainConfig) -> RunResult:
    """Trainer(config).fit(), restoring torch's thread count afterwards (the config sets it)."""
    threads = torch.get_num_threads()
    try:
        return Trainer(config).fit()
    finally:
        torch.set_num_threads(threads)


ADJECTIVES = ("large", "small", "red", "quiet", "old", "fast")
NOUNS = ("dog", "river", "house", "song", "tree", "ship", "stone", "bird")
TEXT_PAIRS = [
    (f"a {adjective} {noun}", f"{noun} that is {adjective}") for adjective in ADJECTIVES for noun in NOUNS
]
"""48 (query, positive) pairs: a tiny text source whose splits each hold a few queries."""


def tiny_text_config(tmp_path: Path, name: str, **sections: dict[str, Any]) -> TrainConfig:
    """A bag-of-tokens text run (the packaged MiniLM's word pieces) on :data:`TEXT_PAIRS` written to
    tmp_path/pairs.jsonl (source = "text_pairs", 25% validation, 25% test), 4 steps, under tmp_path/runs."""
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"query": q, "positive": p}) + "\n" for q, p in TEXT_PAIRS))
    document: dict[str, dict[str, Any]] = {
        "data": {
            "source": "text_pairs",
            "path": str(path),
            "batch_size": 8,
            "max_seq_length": 12,
            "val_fraction": 0.25,
            "test_fraction": 0.25,
        },
        "model": {"encoder": "bag", "embedding_dim": 16, "token_dim": 16},
        "loss": {"symmetric": True, "tau": 0.1},
        "optim": {"lr": 1e-2, "warmup_steps": 0, "total_steps": 4, "grad_clip": 0.0},
        "run": {
            "out_dir": str(tmp_path / "runs"),
            "name": name,
            "num_threads": 1,
            "progress": False,
            "tensorboard": False,
            "log_every": 2,
        },
    }
    return parse_config(_overridden(document, sections))
