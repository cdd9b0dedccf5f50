"""Named random streams: each (seed, stream, rank) its own reproducible generator."""

import torch

from crl.train.streams import derive_generator


def test_derived_streams_are_reproducible_and_distinct() -> None:
    """Same (seed, stream, rank) -> same numbers; another stream, rank or seed -> other numbers."""

    def draw(*key: object) -> list[float]:
        return torch.rand(4, generator=derive_generator(*key)).tolist()  # type: ignore[arg-type]

    assert draw(0, "views", 1) == draw(0, "views", 1)
    assert (
        len(
            {
                tuple(draw(*key))
                for key in [(0, "views", 1), (0, "views", 0), (0, "order", 1), (1, "views", 1)]
            }
        )
        == 4
    )
