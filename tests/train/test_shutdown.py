"""The end of a run: every rank waits at a barrier before leaving the process group, only when the run succeeded."""

from pathlib import Path

import pytest
import torch

import crl.train.distributed as distributed
import crl.train.trainer as trainer_module
from crl.train.distributed import DistContext, shutdown
from crl.train.trainer import Trainer
from tests.train.helpers import tiny_config


class _FakeGroup:
    """Records the calls that ``shutdown`` makes to torch.distributed."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def is_initialized(self) -> bool:
        return "destroy" not in self.calls

    def barrier(self) -> None:
        self.calls.append("barrier")

    def destroy_process_group(self) -> None:
        self.calls.append("destroy")


@pytest.mark.parametrize(
    ("world_size", "wait_for_peers", "expected"),
    [(2, True, ["barrier", "destroy"]), (2, False, ["destroy"]), (1, True, [])],
)
def test_ranks_meet_at_a_barrier_before_leaving(
    monkeypatch: pytest.MonkeyPatch, world_size: int, wait_for_peers: bool, expected: list[str]
) -> None:
    """Two ranks: a barrier (when asked), then the group is destroyed; one process: no collective at all."""
    group = _FakeGroup()
    monkeypatch.setattr(distributed, "dist", group)
    context = DistContext(rank=0, world_size=world_size, local_rank=0, device=torch.device("cpu"))
    shutdown(context, wait_for_peers=wait_for_peers)
    assert group.calls == expected


def _recording_trainer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Trainer, list[bool]]:
    """A tiny one-process Trainer whose ``shutdown`` records its ``wait_for_peers``."""
    waits: list[bool] = []
    monkeypatch.setattr(
        trainer_module, "shutdown", lambda context, *, wait_for_peers: waits.append(wait_for_peers)
    )
    return Trainer(tiny_config(tmp_path, "run", optim={"total_steps": 2, "warmup_steps": 0})), waits


def test_fit_waits_for_the_peers_after_success(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, waits = _recording_trainer(tmp_path, monkeypatch)
    trainer.fit()
    assert waits == [True]


def test_fit_leaves_without_waiting_after_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, waits = _recording_trainer(tmp_path, monkeypatch)

    def broken(started: float) -> None:
        raise RuntimeError("a rank's step failed")

    monkeypatch.setattr(trainer, "_fit", broken)
    with pytest.raises(RuntimeError, match="step failed"):
        trainer.fit()
    assert waits == [False]
