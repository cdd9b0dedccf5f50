"""The fused CPU passes (crl.objectives._native) against float64 references, edge values, threads, and the loss
with and without them; the build's fallback when no compiler works."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from crl.objectives import _native, _shifted, contrastive_loss

FUSED = _native.fused_passes()
needs_fused = pytest.mark.skipif(FUSED is None, reason="no C compiler here: the fused passes are not built")


def _exponents(rows: int, cols: int, ld: int, seed: int) -> torch.Tensor:
    """A (rows x cols) view with row stride ``ld`` of base-2 exponents in [-140, 5], some -inf (left out)."""
    g = torch.Generator().manual_seed(seed)
    storage = torch.rand(rows, ld, generator=g) * -145.0 + 5.0
    storage[torch.rand(rows, ld, generator=g) < 0.05] = -torch.inf
    return storage[:, :cols]


def _close(got: torch.Tensor, want: torch.Tensor, rtol: float, scale: float = 1.0) -> None:
    """got = want (float64) to ``rtol``, where 2^x below float32's smallest normal may be flushed to 0 (and then
    multiplied by at most ``scale``)."""
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=scale * torch.finfo(torch.float32).tiny)


@needs_fused
def test_exp2_is_within_two_ulp_of_float64_over_the_float32_range():
    """2^x for x from -126 to 127 (every normal result) within 2.5e-7 relative of float64 (about 2 ulp); torch's
    own exp2 is within 1.2e-7 here. At and below -127, and at -inf, the result is 0; at 128, +inf; results below the
    smallest normal float32 may be flushed to 0 (in the kernel they are terms below 2^-126 of a sum of at least
    e^-60)."""
    x = torch.linspace(-126.0, 127.0, 2_000_001)
    got = FUSED.exp2_rows(x.clone()[None, :])[0]
    _close(got, torch.exp2(x.double()), rtol=2.5e-7)
    edges = torch.tensor([[-torch.inf, -1000.0, -127.0, 128.0, 0.0, 1.0, -1.0]])
    assert FUSED.exp2_rows(edges)[0].tolist() == [0.0, 0.0, 0.0, torch.inf, 1.0, 2.0, 0.5]


@needs_fused
@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 140),
    cols=st.integers(1, 70),
    pad=st.integers(0, 5),
    threads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
def test_each_pass_equals_its_float64_formula(rows, cols, pad, threads, seed):
    """On strided blocks (row stride cols + pad), one or two threads: exp2_rows writes 2^x and its row sums,
    exp2_rank_one writes 2^x (1 + u_i v_j), exp2_sums gives sum_j 2^x and sum_i w_i 2^x and leaves x unchanged."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x = _exponents(rows, cols, cols + pad, seed)
        g = torch.Generator().manual_seed(seed + 1)
        u, v, w = (
            torch.rand(rows, generator=g),
            torch.rand(cols, generator=g) * 4,
            torch.rand(rows, generator=g),
        )
        exact = torch.exp2(x.double())

        sums = torch.empty(rows)
        block = FUSED.exp2_rows(x.clone(), sums)
        _close(block, exact, rtol=2.5e-7)
        torch.testing.assert_close(sums.double(), exact.sum(1), rtol=2e-6, atol=1e-30)

        weighted = FUSED.exp2_rank_one(x.clone(), u, v)
        want = exact * (1 + u.double()[:, None] * v.double()[None, :])
        _close(weighted, want, rtol=5e-7, scale=5.0)

        kept = x.clone()
        row_sums, col_sums = FUSED.exp2_sums(kept, w)
        assert torch.equal(kept, x)
        torch.testing.assert_close(row_sums.double(), exact.sum(1), rtol=2e-6, atol=1e-30)
        torch.testing.assert_close(col_sums.double(), exact.T @ w.double(), rtol=2e-6, atol=1e-30)
    finally:
        torch.set_num_threads(before)


@needs_fused
def test_passes_reject_what_their_pointers_cannot_read():
    """Non-float32, a transposed block (columns not contiguous) or a strided vector: a ValueError, not a crash."""
    block = torch.zeros(4, 5)
    with pytest.raises(ValueError, match="float32 CPU"):
        FUSED.exp2_rows(block.double())
    with pytest.raises(ValueError, match="contiguous rows"):
        FUSED.exp2_rows(torch.zeros(5, 4).T)
    with pytest.raises(ValueError, match="contiguous"):
        FUSED.exp2_sums(block, torch.zeros(8)[::2])


def _loss_and_grads(case: str, dtype: torch.dtype):
    g = torch.Generator().manual_seed(3)
    a = F.normalize(torch.randn(150, 12, generator=g, dtype=torch.float64), dim=1).to(dtype)
    p = F.normalize(torch.randn(150, 12, generator=g, dtype=torch.float64), dim=1).to(dtype)
    neg = F.normalize(torch.randn(70, 12, generator=g, dtype=torch.float64), dim=1).to(dtype)
    ids = torch.arange(150) % 97
    x, y = a.requires_grad_(True), p.requires_grad_(True)
    if case == "symmetric":
        loss = contrastive_loss(
            x, y, symmetric=True, tau=0.05, tiling="tiled", block_size=64, positive_ids=ids
        )
    else:
        loss = contrastive_loss(x, y, neg, tau=0.05, tiling="tiled", block_size=64)
    loss.backward()
    return loss.detach(), x.grad, y.grad


@needs_fused
@pytest.mark.parametrize("case", ["symmetric", "one-sided"])
def test_loss_with_fused_passes_equals_torchs_passes_and_float64(monkeypatch, case):
    """The symmetric loss (fused forward sums and rank-one weights, false negatives left out) and the one-sided
    loss (fused exp2 and row sums in its stripes): the same loss and gradients as with torch's operators to
    float32 rounding, and as float64."""
    fused = _loss_and_grads(case, torch.float32)
    wide = _loss_and_grads(case, torch.float64)
    monkeypatch.setattr(_shifted, "fused_passes", lambda: None)
    plain = _loss_and_grads(case, torch.float32)
    for got, torch_ops, want in zip(fused, plain, wide, strict=True):
        torch.testing.assert_close(got, torch_ops, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)


def test_failed_build_warns_once_and_falls_back(monkeypatch, tmp_path):
    """A compiler that fails: one RuntimeWarning naming it and CRL_NATIVE, then None (torch's operators)."""
    monkeypatch.setenv("CC", "false")
    monkeypatch.setenv("CRL_CACHE_DIR", str(tmp_path))
    _native.fused_passes.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match=r"'false'.*CRL_NATIVE=0"):
            assert _native.fused_passes() is None
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert _native.fused_passes() is None
    finally:
        _native.fused_passes.cache_clear()


def test_crl_native_0_skips_the_build(monkeypatch, tmp_path):
    """CRL_NATIVE=0: no build (nothing written to the cache), no warning, torch's operators."""
    monkeypatch.setenv("CRL_NATIVE", "0")
    monkeypatch.setenv("CRL_CACHE_DIR", str(tmp_path))
    _native.fused_passes.cache_clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert _native.fused_passes() is None
        assert not any(tmp_path.iterdir())
    finally:
        _native.fused_passes.cache_clear()


@needs_fused
def test_build_is_cached_per_source_and_cpu(monkeypatch, tmp_path):
    """A fresh cache folder gets one library, named by the hash of source, flags, compiler and CPU; a second load
    reuses it."""
    monkeypatch.setenv("CRL_CACHE_DIR", str(tmp_path))
    _native.fused_passes.cache_clear()
    try:
        assert _native.fused_passes() is not None
        built = list((tmp_path / "native").iterdir())
        assert [p.name for p in built] == [_native.library_path(_native._compiler() or "").name]
        stamp = built[0].stat().st_mtime_ns
        _native.fused_passes.cache_clear()
        assert _native.fused_passes() is not None
        assert built[0].stat().st_mtime_ns == stamp
    finally:
        _native.fused_passes.cache_clear()


@needs_fused
def test_forked_child_runs_the_threaded_passes(tmp_path):
    """A child forked after the parent ran the passes on two OpenMP threads runs them with one thread, as torch's
    data-loader workers do (with more, torch's own operators wait forever there too: GNU OpenMP's pool does not
    survive a fork)."""
    import multiprocessing

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.full((256, 8), -1.0)
        FUSED.exp2_rows(x)
        child = multiprocessing.get_context("fork").Process(
            target=_halves_in_child, args=(str(tmp_path / "ok"),)
        )
        child.start()
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
        assert child.exitcode == 0 and (tmp_path / "ok").read_text() == "0.5"
    finally:
        torch.set_num_threads(before)


def _halves_in_child(path: str) -> None:
    torch.set_num_threads(1)
    x = torch.full((256, 8), -1.0)
    _native.fused_passes().exp2_rows(x)
    with open(path, "w") as out:
        out.write(str(float(x.max())))
