"""Shared fixtures."""

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Run with one torch thread (claims are many small tensor operations), restoring the setting afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
