"""Named random streams: one independent CPU generator per (seed, stream name, rank).

Every random choice of crl's training and evaluation (initial weights, data order, views, negatives, held-out
draws and splits) takes its generator from :func:`derive_generator`, so a run is reproduced by its seed alone.
"""

from __future__ import annotations

import zlib

import numpy as np
import torch

__all__ = ["derive_generator"]


def derive_generator(seed: int, stream: str, rank: int = 0) -> torch.Generator:
    """An independent CPU generator for one named random stream of one rank.

    The seed comes from numpy's SeedSequence([seed, crc32(stream), rank]): streams and ranks never share a seed, and
    the same (seed, stream, rank) always gives the same generator.
    """
    state = np.random.SeedSequence([seed, zlib.crc32(stream.encode("utf-8")), rank]).generate_state(
        2, dtype=np.uint32
    )
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))
