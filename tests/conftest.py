"""Shared fixtures (one Milvus server per session), the tests that need it marked slow, and the quick verify run
started in the background when its test is selected."""

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from tests.milvus_server import start_or_skip
from tests.quick_verify import RUN, TEST_NAME, BackgroundVerify

SLOW_FIXTURES = frozenset({"milvus_server"})
"""Fixtures that make a test slow wherever it is: the Milvus server takes 10-20 s to start."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a fixture of :data:`SLOW_FIXTURES` ``slow`` before ``-m`` selects (make test
    leaves the slow tests out; make test-slow and CI run them)."""
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the quick verify run at once when its test is among the selected ones (tests/quick_verify.py), after
    ``-m`` and ``-k`` have deselected."""
    if any(item.name == TEST_NAME for item in session.items):
        session.config.stash[RUN] = BackgroundVerify.start()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the background run, if one was started, and remove its folder."""
    run = config.stash.get(RUN, None)
    if run is not None:
        run.stop()


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Run with one torch thread (claims are many small tensor operations), restoring the setting afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Milvus standalone server for the session's tests that use it (tests/milvus_server.py)."""
    started = start_or_skip(tmp_path_factory.mktemp("milvus"))
    yield started
    started.stop()
