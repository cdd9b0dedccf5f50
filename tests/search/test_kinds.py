"""The registry of index kinds: one entry per kind, each builds an index only it recognises, settings by family."""

import numpy as np
import pytest

from crl.search import KINDS, Index, Kind
from crl.search.kinds import INDEX_KINDS, is_kind, new_index, resolve_params


def test_the_registry_holds_every_kind_and_only_those() -> None:
    assert tuple(INDEX_KINDS) == KINDS


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_builds_an_index_that_only_it_recognises(kind: Kind) -> None:
    params = resolve_params(kind, 4096, 16, {})
    assert sorted(params) == sorted(INDEX_KINDS[kind].params)
    index = new_index(kind, 16, params)
    assert [other for other in KINDS if is_kind(index, other)] == [kind]


def test_a_setting_of_another_family_names_the_kinds_that_take_it() -> None:
    vectors = np.random.default_rng(0).standard_normal((400, 8)).astype(np.float32)
    with pytest.raises(ValueError, match="ef_search applies to kind='hnsw' only; this index is 'ivf'"):
        Index.build(vectors, kind="ivf", nlist=4).search(vectors[:1], 3, ef_search=8)
    with pytest.raises(
        ValueError, match="nprobe applies to kinds 'ivf' and 'ivfpq' only; this index is 'flat'"
    ):
        Index.build(vectors, kind="flat").search(vectors[:1], 3, nprobe=2)
