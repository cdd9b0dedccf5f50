"""The sweep executors of one machine: same stored results as in process, and resumption after an interruption.

If these fail, the executor protocol lets a sweep store a cell twice, lose a finished cell, recompute a stored
one, or store other results than an in-process run.
"""

import os
import sys
from pathlib import Path

import pytest

from crl.sweep import (
    Cell,
    Executor,
    InProcess,
    ProcessPool,
    SweepStore,
    WarmPool,
    default_executor,
    derive_seed,
    run_cells,
)
from crl.sweep.run import executor_named
from tests.sweep.helpers import (
    calls,
    grid,
    interrupt_then_resume,
    kill_driver_then_resume,
    logged_nan,
    wait_until_gone,
    worker_pid,
)


def test_every_executor_follows_the_protocol() -> None:
    from crl.sweep.ray_executor import RayExecutor

    assert all(issubclass(kind, Executor) for kind in (InProcess, ProcessPool, WarmPool, RayExecutor))
    assert default_executor(1) == InProcess() and default_executor(3) == ProcessPool(3)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="workers"):
            default_executor(bad)  # type: ignore[arg-type]


def test_in_process_sweep_resumes_after_an_interruption(tmp_path: Path) -> None:
    interrupt_then_resume(tmp_path, InProcess())


def test_a_killed_pool_driver_resumes_without_loss_or_double_counting(tmp_path: Path) -> None:
    """SIGKILL the driver of a process-pool sweep: the rerun stores every missing cell once, and nothing else."""
    kill_driver_then_resume(tmp_path, "pool", ProcessPool(2))


def test_a_warm_pool_computes_every_sweep_in_the_same_workers_until_closed(tmp_path: Path) -> None:
    """If this fails, `crl verify` starts a fresh pool (interpreters importing torch) for each claim's sweep again,
    or a warm pool's results differ from an in-process run's, or its workers outlive close()."""
    cells = [Cell({"i": i}, seed=derive_seed(0, i)) for i in range(6)]
    pool = WarmPool(2)
    try:
        first = [result for _, result, _ in pool.run(worker_pid, cells)]
        second = [result for _, result, _ in pool.run(worker_pid, cells)]
    finally:
        pool.close()
    workers = {result["pid"] for result in first}
    assert len(workers) == 2 and os.getpid() not in workers
    assert {result["pid"] for result in second} <= workers
    expected = {result["i"]: result["draw"] for _, result, _ in InProcess().run(worker_pid, cells)}
    assert {result["i"]: result["draw"] for result in first + second} == expected
    assert wait_until_gone(workers, 10.0) == []


def test_a_refused_result_stops_the_sweep_at_once(tmp_path: Path) -> None:
    """A result the store refuses (NaN) ends the sweep at that cell: nothing stored, no later cell computed."""
    with SweepStore(tmp_path / "r.sqlite") as store:
        with pytest.raises(ValueError, match="NaN"):
            run_cells(store, "C0", grid(tmp_path, 3), logged_nan, run_id="r")
        assert store.records("C0") == []
    assert calls(tmp_path) == [0]


def test_executor_names_of_the_command() -> None:
    """`crl verify --executor/--workers/--address` combinations that cannot work are refused by name."""
    from crl.sweep.ray_executor import RayExecutor

    warm = executor_named("process", workers=2)
    assert isinstance(warm, WarmPool) and warm.workers == 2
    assert executor_named("process", workers=1) == InProcess()
    local = executor_named("ray", workers=2)
    assert isinstance(local, RayExecutor) and (local.address, local.num_cpus) == (None, 2)
    assert executor_named("ray", address="auto").address == "auto"  # type: ignore[attr-defined]
    for name, kwargs, named in [
        ("dask", {}, "--executor 'dask' is not known"),
        ("process", {"address": "auto"}, "--address 'auto' names a Ray cluster"),
        ("ray", {"address": "auto", "workers": 4}, "--workers 4 sizes the process pool"),
        ("ray", {"workers": 0}, "workers=0"),
    ]:
        with pytest.raises(ValueError, match=named):
            executor_named(name, **kwargs)


def test_missing_ray_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ray installed, --executor ray must stop at once with the fix (exit 2), before any claim runs."""
    from crl.commands.verify import verify_command
    from crl.sweep.ray_executor import RayExecutor, RayNotInstalledError

    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets where ray is not installed
    with pytest.raises(RayNotInstalledError, match=r"pip install 'crl\[ray\]'"):
        RayExecutor()
    status = verify_command(
        fidelity="quick",
        claims="C3",
        out=tmp_path / "out",
        seed=0,
        workers=1,
        threads=1,
        fresh=False,
        executor="ray",
    )
    assert status == 2 and "needs ray, an optional dependency" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
