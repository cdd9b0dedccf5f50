"""The feature cache: a hit never recomputes, a changed key never reuses, an interrupted write leaves it intact."""

from pathlib import Path

import pytest
import torch

import crl.data.features as features_module
from crl.data.features import BLOCK, MANIFEST, FeatureCache, FeatureKey, Features, cached_features

TOTAL = 3 * BLOCK + 10


def _key(**changes: object) -> FeatureKey:
    fields: dict[str, object] = {
        "model": "toy",
        "weights_sha256": "ab" * 32,
        "dataset": "wordnet",
        "split": "train",
        "options": {"max_seq_length": "128"},
    }
    fields.update(changes)
    return FeatureKey(**fields)  # type: ignore[arg-type]


class _Backbone:
    """Features of item i: x_i = (i, 2i), y_i = (-i,); records the blocks it was asked for."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, start: int, stop: int) -> Features:
        assert start % BLOCK == 0
        self.calls.append((start, stop))
        items = torch.arange(start, stop, dtype=torch.float32)
        return Features(torch.stack([items, 2 * items], dim=1), -items[:, None])

    @property
    def computed(self) -> int:
        return sum(stop - start for start, stop in self.calls)


def test_a_hit_never_recomputes_and_a_longer_prefix_computes_only_the_missing_blocks(tmp_path: Path) -> None:
    cache, backbone = FeatureCache(tmp_path), _Backbone()
    first, computed = cached_features(cache, _key(), 10, TOTAL, backbone)
    assert computed == BLOCK and backbone.calls == [(0, BLOCK)] and first.count == 10
    again, computed = cached_features(cache, _key(), BLOCK, TOTAL, backbone)
    assert computed == 0 and len(backbone.calls) == 1 and torch.equal(again.x[:10], first.x)
    longer, computed = cached_features(cache, _key(), TOTAL, TOTAL, backbone)
    assert computed == TOTAL - BLOCK and backbone.calls[1:] == [
        (BLOCK, 2 * BLOCK),
        (2 * BLOCK, 3 * BLOCK),
        (3 * BLOCK, TOTAL),
    ]
    assert torch.equal(longer.x[:, 0], torch.arange(TOTAL, dtype=torch.float32))  # the old rows, then the new
    assert sorted(p.name for p in cache.folder(_key()).iterdir()) == [
        f"features-{TOTAL}.safetensors",
        MANIFEST,
    ]
    _, computed = cached_features(cache, _key(), 5, TOTAL, backbone)
    assert computed == 0


@pytest.mark.parametrize(
    "changes",
    [
        {"weights_sha256": "cd" * 32},
        {"split": "test"},
        {"dataset": "bible"},
        {"model": "other"},
        {"options": {"max_seq_length": "64"}},
    ],
)
def test_a_changed_key_misses_and_leaves_the_old_entry(tmp_path: Path, changes: dict[str, object]) -> None:
    cache, backbone = FeatureCache(tmp_path), _Backbone()
    cached_features(cache, _key(), 10, TOTAL, backbone)
    _, computed = cached_features(cache, _key(**changes), 10, TOTAL, backbone)
    assert computed == BLOCK and cache.folder(_key(**changes)) != cache.folder(_key())
    assert cache.read(_key()) is not None


def test_a_manifest_of_another_key_in_the_folder_is_a_miss(tmp_path: Path) -> None:
    cache = FeatureCache(tmp_path)
    cache.write(_key(), Features(torch.zeros(BLOCK, 2), torch.zeros(BLOCK, 1)))
    manifest = cache.folder(_key()) / MANIFEST
    manifest.write_text(manifest.read_text().replace('"toy"', '"toy2"'))
    assert cache.read(_key()) is None


def test_an_interrupted_write_leaves_the_previous_entry_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The features file is written (temporary, rename) before the manifest: killed in between, the folder
    holds a new file the old manifest does not name, and the reader still gets the old entry."""
    cache, backbone = FeatureCache(tmp_path), _Backbone()
    cached_features(cache, _key(), 10, TOTAL, backbone)
    folder = cache.folder(_key())
    (folder / f".features-{TOTAL}.safetensors.tmp-999").write_bytes(
        b"half written"
    )  # a killed writer's temporary

    def killed(path: Path, manifest: dict[str, object]) -> None:
        raise KeyboardInterrupt("killed while writing the manifest")

    monkeypatch.setattr(features_module, "write_manifest", killed)
    with pytest.raises(KeyboardInterrupt):
        cached_features(cache, _key(), TOTAL, TOTAL, backbone)
    monkeypatch.undo()
    old = cache.read(_key())
    assert old is not None and old.count == BLOCK
    resumed = _Backbone()
    done, computed = cached_features(cache, _key(), TOTAL, TOTAL, resumed)
    assert computed == TOTAL - BLOCK and done.count == TOTAL and float(done.y[-1, 0]) == -(TOTAL - 1)


def test_a_damaged_file_is_computed_again_with_a_warning(tmp_path: Path) -> None:
    cache, backbone = FeatureCache(tmp_path), _Backbone()
    path = cache.write(_key(), backbone(0, BLOCK))
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.warns(UserWarning, match="does not match its manifest's SHA-256"):
        _, computed = cached_features(cache, _key(), 10, TOTAL, backbone)
    assert computed == BLOCK


def test_asking_for_no_items_or_more_than_the_split_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ask for 1 to"):
        cached_features(FeatureCache(tmp_path), _key(), TOTAL + 1, TOTAL, _Backbone())
