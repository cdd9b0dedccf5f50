"""The held-out metric during training ([run] eval_every): logged under heldout/, and it changes nothing.

If these fail, TensorBoard shows no held-out curve, or watching one perturbs the run (a consumed generator,
accumulated gradients), so a monitored run no longer reproduces an unmonitored one bit for bit.
"""

import json
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from crl.train.build import build_model
from crl.train.config import TextData
from crl.train.data import text_pairs, text_tokenize
from crl.train.heldout_monitor import TextHeldoutMonitor, rank_of_positive, text_embedders
from tests.train.helpers import fit, tiny_config, tiny_text_config

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


def test_a_text_run_logs_heldout_ndcg_on_its_validation_split(tmp_path: Path) -> None:
    """eval_every on a text run: nDCG@10 and recall@10 rows and events, and the same weights as unwatched."""
    watched = tiny_text_config(tmp_path, "watched", run={"eval_every": 2, "tensorboard": True})
    result, reference = fit(watched), fit(tiny_text_config(tmp_path, "plain"))
    assert result.checkpoint.read_bytes() == reference.checkpoint.read_bytes()
    rows = [json.loads(line) for line in (watched.run_dir / "metrics.jsonl").read_text().splitlines()]
    heldout = [row for row in rows if "heldout/ndcg@10" in row]
    assert [row["step"] for row in heldout] == [2, 4]
    assert all(
        0.0 < row["heldout/ndcg@10"] <= 1.0 and 0.0 < row["heldout/recall@10"] <= 1.0 for row in heldout
    )
    assert result.metrics["heldout/ndcg@10"] == heldout[-1]["heldout/ndcg@10"]
    events = EventAccumulator(str(watched.run_dir / "tensorboard"))
    events.Reload()
    assert {"heldout/ndcg@10", "heldout/recall@10", "train/loss"} <= set(events.Tags()["scalars"])


def test_the_text_monitor_ranks_a_fixed_sample_of_validation_queries(tmp_path: Path) -> None:
    config = tiny_text_config(tmp_path, "sample", run={"eval_every": 2, "eval_pairs": 3})
    data = config.data
    assert isinstance(data, TextData)
    monitor = TextHeldoutMonitor.from_config(config, torch.device("cpu"))
    validation = {pair.query for pair in text_pairs(data, "val")}
    others = {pair.query for split in ("train", "test") for pair in text_pairs(data, split)}  # type: ignore[arg-type]
    assert len(monitor.task.queries) == 3 and set(monitor.task.queries) <= validation
    assert not validation & others
    assert len(monitor.task.corpus) == 3  # their own relevant documents only: eval_pairs = 3 documents
    again = TextHeldoutMonitor.from_config(config, torch.device("cpu"))
    assert again.task == monitor.task


def test_a_text_run_without_a_validation_split_stops_before_its_folder(tmp_path: Path) -> None:
    config = tiny_text_config(tmp_path, "no_val", data={"val_fraction": 0.0}, run={"eval_every": 2})
    with pytest.raises(
        ValueError, match=r"\[data\] val_fraction = 0.0 leaves the val split .* run.eval_every = 0"
    ):
        fit(config)
    assert not config.run_dir.exists()


def test_text_embedders_give_each_text_its_own_vector_in_the_order_given(tmp_path: Path) -> None:
    """Texts are embedded longest first in batches; the vectors come back in the caller's order, as alone."""
    config = tiny_text_config(tmp_path, "order")
    assert isinstance(config.data, TextData)
    model = build_model(config.model, config.loss, (12,), (12,), torch.Generator().manual_seed(0)).eval()
    texts = ["a dog", "a very large and quiet old river", "ship", "a small red bird that sings", "stone"]
    queries, documents = text_embedders(
        model, text_tokenize(config.data), batch_size=2, device=torch.device("cpu")
    )
    alone = torch.cat([queries([text]) for text in texts])
    torch.testing.assert_close(queries(texts), alone, rtol=0, atol=1e-6)
    torch.testing.assert_close(documents(texts), alone, rtol=0, atol=1e-6)  # one shared tower
