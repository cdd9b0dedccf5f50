"""The held-out metric during training ([run] eval_every): logged under heldout/, and it changes nothing.

If these fail, TensorBoard shows no held-out curve, or watching one perturbs the run (a consumed generator,
accumulated gradients), so a monitored run no longer reproduces an unmonitored one bit for bit.
"""

import json
from pathlib import Path

import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from crl.train.heldout_monitor import rank_of_positive
from tests.train.helpers import fit, tiny_config

SHORT = {"total_steps": 10, "warmup_steps": 2}


def test_heldout_rows_and_events_without_changing_the_run(tmp_path: Path) -> None:
    watched = tiny_config(
        tmp_path, "watched", optim=SHORT, run={"eval_every": 5, "eval_pairs": 100, "tensorboard": True}
    )
    plain = tiny_config(tmp_path, "plain", optim=SHORT)
    result, reference = fit(watched), fit(plain)
    assert result.checkpoint.read_bytes() == reference.checkpoint.read_bytes()
    rows = [json.loads(line) for line in (watched.run_dir / "metrics.jsonl").read_text().splitlines()]
    heldout = [row for row in rows if "heldout/accuracy@1" in row]
    assert [row["step"] for row in heldout] == [5, 10]
    assert all(0.0 <= row["heldout/accuracy@1"] <= row["heldout/mrr"] <= 1.0 for row in heldout)
    assert result.metrics["heldout/accuracy@1"] == heldout[-1]["heldout/accuracy@1"]
    events = EventAccumulator(str(watched.run_dir / "tensorboard"))
    events.Reload()
    assert {"heldout/accuracy@1", "heldout/mrr", "train/loss"} <= set(events.Tags()["scalars"])


def test_rank_of_positive_counts_ties_against_the_query() -> None:
    """Query 0 ties its positive with gallery item 2 (rank 1, not 0); query 1 is first; query 2 is last."""
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    gallery = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    assert rank_of_positive(queries, gallery).tolist() == [1, 0, 2]
