"""Batches that are a tensor or a mapping of tensors: row count, row slices and device moves treat both alike."""

import pytest
import torch

from crl.data import batch_rows, move_batch, slice_rows


def test_rows_and_slices_of_a_tensor_and_of_a_mapping_agree() -> None:
    """A mapping batch must slice every tensor on its first axis, exactly as a tensor batch is sliced."""
    ids = torch.arange(12).reshape(6, 2)
    batch = {"input_ids": ids, "attention_mask": torch.ones(6, 2, dtype=torch.long)}
    assert batch_rows(ids) == batch_rows(batch) == 6
    part = slice_rows(batch, slice(2, 5))
    assert isinstance(part, dict) and torch.equal(part["input_ids"], ids[2:5])
    assert part["attention_mask"].shape == (3, 2)
    assert torch.equal(slice_rows(ids, slice(2, 5)), ids[2:5])  # type: ignore[arg-type]
    moved = move_batch(batch, torch.device("cpu"))
    assert isinstance(moved, dict) and set(moved) == set(batch)


def test_a_mapping_with_unequal_rows_is_refused() -> None:
    """Token ids and masks of different batch sizes are a bug in the source: say so, with the sizes."""
    with pytest.raises(ValueError, match="one row count"):
        batch_rows({"input_ids": torch.zeros(3, 2), "attention_mask": torch.zeros(4, 2)})
