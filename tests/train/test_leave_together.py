"""The end of a run: every rank waits at a barrier before leaving the process group, only when the run succeeded."""

from pathlib import Path

import pytest
import torch

import crl.train.distributed as distributed
import crl.train.trainer as trainer_module
from crl.train.distributed import DistContext, leave_together, shutdown
from crl.train.trainer import Trainer
from tests.train.helpers import tiny_config


class _FakeGroup:
    """Records the calls that ``leave_together`` and ``shutdown`` make to torch.distributed."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def is_initialized(self) -> bool:
        return "destroy" not in self.calls

    def barrier(self) -> None:
        self.calls.append("barrier")

    def destroy_process_group(self) -> None:
        self.calls.append("destroy")


@pytest.mark.parametrize(("world_size", "expected"), [(2, ["barrier", "destroy"]), (1, [])])
def test_ranks_meet_at_a_barrier_before_leaving(
    monkeypatch: pytest.MonkeyPatch, world_size: int, expected: list[str]
) -> None:
    """Two ranks: a barrier, then the group is destroyed; one process: no collective at all."""
    group = _FakeGroup()
    monkeypatch.setattr(distributed, "dist", group)
    context = DistContext(rank=0, world_size=world_size, local_rank=0, device=torch.device("cpu"))
    leave_together(context)
    shutdown(context)
    assert group.calls == expected


@pytest.mark.parametrize("fails", [False, True])
def test_fit_waits_for_the_peers_only_after_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(trainer_module, "leave_together", lambda context: calls.append("barrier"))
    monkeypatch.setattr(trainer_module, "shutdown", lambda context: calls.append("shutdown"))
    trainer = Trainer(tiny_config(tmp_path, "run", optim={"total_steps": 2, "warmup_steps": 0}))
    if fails:

        def broken(started: float) -> None:
            raise RuntimeError("a rank's step failed")

        monkeypatch.setattr(trainer, "_fit", broken)
        with pytest.raises(RuntimeError, match="step failed"):
            trainer.fit()
        assert calls == ["shutdown"]
    else:
        trainer.fit()
        assert calls == ["barrier", "shutdown"]
