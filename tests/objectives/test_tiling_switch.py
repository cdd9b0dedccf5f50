"""``tiling="auto"``: the tiled kernel on the CPU from 2^17 scores on (it is the faster there), on CUDA from 2^22."""

import pytest
import torch
import torch.nn.functional as F

from crl.objectives import _lse, contrastive_loss


@pytest.mark.parametrize(
    ("n", "m", "device", "tiled"),
    [
        (256, 256, "cpu", False),
        (512, 256, "cpu", False),
        (512, 512, "cpu", True),
        (512, 512, "cuda", False),
        (2048, 2048, "cuda", False),
        (4096, 2048, "cuda", True),
    ],
)
def test_auto_switches_at_the_device_threshold(n: int, m: int, device: str, tiled: bool) -> None:
    """If this fails, "auto" would keep CPU users on the slower dense path, or move CUDA ones off cuBLAS's."""
    where = torch.device(device)
    assert _lse.use_tiled("auto", n, m, where) is tiled
    assert _lse.use_tiled("tiled", 2, 2, where) and not _lse.use_tiled("dense", n, m, where)


def test_auto_runs_the_tiled_kernel_for_a_512_batch_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """If this fails, a CLIP batch of 512 on the CPU would not take the fast path (docs/benchmarks.md)."""
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[0].shape[0])
        return tiled(*args, **kwargs)

    tiled = _lse.tiled_logsumexp_both
    monkeypatch.setattr(_lse, "tiled_logsumexp_both", counting)
    g = torch.Generator().manual_seed(0)
    a, p = (F.normalize(torch.randn(512, 16, generator=g), dim=1) for _ in range(2))
    auto = contrastive_loss(a, p, tau=0.1, symmetric=True)
    assert calls == [512]
    dense = contrastive_loss(a, p, tau=0.1, symmetric=True, tiling="dense")
    torch.testing.assert_close(auto, dense, rtol=1e-6, atol=1e-6)
