"""The tiled kernel's fused CPU passes: one pass over a block where torch's operators make two or three.

On the CPU each block of the tiled kernel costs one GEMM (about 3.2 ms for 1024 x 1024 x 128 on one thread of this
machine) and then memory-bound elementwise passes: exp2 (0.55 ms), row sums (0.13), a column product (0.15), and in
the symmetric backward the rank-one weights (0.41 + 0.28). ``_fused.c`` does each group in one pass (exp2 and its
row sums; exp2 times (1 + u_i v_j); row and weighted column sums of exp2 without writing it); in one run on this
CPU they took 0.34, 0.26 and 0.37 ms where torch's passes took 0.55 + 0.13, 0.83 and 0.60 ms (``make bench``
reports the loss-level effect).

The C source ships with the package and is compiled on first use with the system C compiler (``$CC``, else
``cc``; ``-O3 -march=native``) into ``$CRL_CACHE_DIR/native`` (default ``~/.cache/crl/native``), keyed by the
source, flags, compiler and CPU, then loaded with ctypes. Without a compiler, or with ``CRL_NATIVE=0``, the kernel
uses torch's operators (same results to float32 rounding, slower), with one warning when a build fails. Each call
splits its rows over OpenMP threads: loaded after torch, the library binds to torch's libgomp (the same soname),
so it runs on torch's thread pool with ``torch.get_num_threads()`` threads. (A Python thread pool instead competed
with the OpenMP workers that spin after each GEMM: with two threads it gained 1.6% where one thread gained 7%.)
"""

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import torch
from torch import Tensor

from crl._cache import default_cache_dir

SOURCE = Path(__file__).with_name("_fused.c")
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fopenmp", "-fPIC", "-shared")
_MIN_ROWS_PER_PART = 64


def _compiler() -> str | None:
    """The C compiler: ``$CC``, else ``cc`` on the PATH, else None."""
    return os.environ.get("CC") or shutil.which("cc")


def _cpu_signature() -> str:
    """The machine and its instruction-set flags (``-march=native`` code is only valid on a CPU that has them)."""
    flags = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        flags = next((line for line in cpuinfo.read_text().splitlines() if line.startswith("flags")), "")
    return f"{platform.machine()} {flags}"


def library_path(compiler: str) -> Path:
    """Where the library built by ``compiler`` from this source for this CPU is cached."""
    key = hashlib.sha256()
    for part in (SOURCE.read_bytes(), " ".join(FLAGS).encode(), compiler.encode(), _cpu_signature().encode()):
        key.update(part)
    return default_cache_dir() / "native" / f"fused-{key.hexdigest()[:16]}.so"


def _build(compiler: str, target: Path) -> None:
    """Compile the source into ``target`` (via a temporary file and an atomic rename: concurrent builds are safe)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        subprocess.run(
            [compiler, *FLAGS, "-o", str(built), str(SOURCE)], check=True, capture_output=True, timeout=300
        )
        os.replace(built, target)


class FusedPasses:
    """The fused passes of ``_fused.c`` on float32 CPU blocks whose rows are contiguous (any row stride)."""

    def __init__(self, library: ctypes.CDLL) -> None:
        pointer, size = ctypes.c_void_p, ctypes.c_int64
        self._rows = library.crl_exp2_rows
        self._rows.argtypes = [pointer, size, size, size, pointer]
        self._rank_one = library.crl_exp2_rank_one
        self._rank_one.argtypes = [pointer, size, size, size, pointer, pointer]
        self._sums = library.crl_exp2_sums
        self._sums.argtypes = [pointer, size, size, size, pointer, pointer, pointer, pointer, size]

    def exp2_rows(self, block: Tensor, row_sums: Tensor | None = None) -> Tensor:
        """block <- 2^block in place; with ``row_sums`` (rows,), also row_sums_i = sum_j 2^block_ij. Returns block."""
        _check_block(block, row_sums)
        rows, cols = block.shape
        self._rows(
            block.data_ptr(), rows, cols, block.stride(0), None if row_sums is None else row_sums.data_ptr()
        )
        return block

    def exp2_rank_one(self, block: Tensor, u: Tensor, v: Tensor) -> Tensor:
        """block_ij <- 2^block_ij (1 + u_i v_j) in place (u (rows,), v (cols,)). Returns block."""
        _check_block(block, u, v)
        rows, cols = block.shape
        self._rank_one(block.data_ptr(), rows, cols, block.stride(0), u.data_ptr(), v.data_ptr())
        return block

    def exp2_sums(self, block: Tensor, weights: Tensor) -> tuple[Tensor, Tensor]:
        """(sum_j 2^block_ij, sum_i w_i 2^block_ij): row sums and weighted column sums, ``block`` left unchanged.

        The rows are cut into min(threads, rows / 64) ranges, each with its own partial column sums."""
        _check_block(block, weights)
        rows, cols = block.shape
        parts = max(1, min(torch.get_num_threads(), rows // _MIN_ROWS_PER_PART))
        row_sums, col_sums = block.new_empty(rows), block.new_empty(cols)
        work = block.new_empty(2 * parts * cols)
        self._sums(
            block.data_ptr(),
            rows,
            cols,
            block.stride(0),
            weights.data_ptr(),
            row_sums.data_ptr(),
            col_sums.data_ptr(),
            work.data_ptr(),
            parts,
        )
        return row_sums, col_sums


def _check_block(block: Tensor, *vectors: Tensor | None) -> None:
    """The passes read raw pointers: float32 CPU tensors, the block's rows and the vectors contiguous."""
    tensors = [block, *(v for v in vectors if v is not None)]
    if any(t.dtype != torch.float32 or t.device.type != "cpu" for t in tensors):
        raise ValueError("the fused passes take float32 CPU tensors")
    if block.dim() != 2 or block.stride(1) != 1 or any(not v.is_contiguous() for v in tensors[1:]):
        raise ValueError("the fused passes need a 2-D block with contiguous rows and contiguous vectors")


def _load(compiler: str) -> FusedPasses:
    """Load the cached library for this source and CPU, building it first when absent."""
    target = library_path(compiler)
    if not target.exists():
        _build(compiler, target)
    return FusedPasses(ctypes.CDLL(str(target)))


@functools.cache
def fused_passes() -> FusedPasses | None:
    """The fused passes, built on first use; None with ``CRL_NATIVE=0``, without a C compiler, or when the build
    fails (one RuntimeWarning naming the cause; the kernel then uses torch's operators)."""
    if os.environ.get("CRL_NATIVE", "1") == "0":
        return None
    compiler = _compiler()
    if compiler is None:
        return None
    try:
        return _load(compiler)
    except (OSError, subprocess.SubprocessError, AttributeError) as error:
        detail = getattr(error, "stderr", b"") or b""
        warnings.warn(
            f"crl: could not build the fused CPU passes with {compiler!r} ({error} {detail.decode()[:500]}); the "
            "tiled kernel uses torch's operators instead (slower). Set CRL_NATIVE=0 to skip the build.",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
