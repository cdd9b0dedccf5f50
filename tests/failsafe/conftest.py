"""Fixtures shared by the fail-safe tests of the Milvus backend."""

from collections.abc import Iterator

import pytest

from crl.search.milvus import MilvusIndex


@pytest.fixture
def reconnects(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """A list that grows by one each time a collection reopens its connection."""
    opened: list[int] = []
    reopen = MilvusIndex._reopen

    def counted(self: MilvusIndex) -> None:
        opened.append(1)
        reopen(self)

    monkeypatch.setattr(MilvusIndex, "_reopen", counted)
    yield opened
