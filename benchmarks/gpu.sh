#!/usr/bin/env bash
# The tiled contrastive kernel on CUDA, in one short run (a few minutes on one recent GPU):
#   1. parity of the tiled kernel with the dense computation (float32, and bf16 under torch.autocast), value and
#      gradients, symmetric and one-sided, with and without false-negative ids;
#   2. no host synchronisation in a forward + backward pass (torch.cuda.set_sync_debug_mode("error"));
#   3. speed (median of 5, CUDA events) and peak memory at n = m = 65536, d = 128, beside open_clip's ClipLoss
#      formula written in plain torch (cross_entropy of both directions of a @ p.T * scale);
#   4. one DDP step over nccl (a gathered batch, contrastive_loss with positive_offset) when two GPUs are present.
# Prints figures; exits non-zero when a parity or synchronisation check fails.
# Run: bash benchmarks/gpu.sh   (PYTHON=... to choose the interpreter; N=65536 to change the size).
# DEVICE=cpu N=2048 bash benchmarks/gpu.sh runs parts 1 and 3 on the CPU (a smoke test of the script itself).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export CRL_GPU_N="${N:-65536}" CRL_GPU_DEVICE="${DEVICE:-cuda}"

"$PYTHON" - <<'EOF'
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from crl.objectives import contrastive_loss

dev = torch.device(os.environ["CRL_GPU_DEVICE"])
cuda = dev.type == "cuda"
if cuda and not torch.cuda.is_available():
    sys.exit("benchmarks/gpu.sh: no CUDA device; nothing to check")
name = torch.cuda.get_device_name(dev) if cuda else "CPU smoke test"
print(f"torch {torch.__version__}, {name}, {torch.cuda.device_count()} GPU(s)")
failed = []


def pair(n, d=128, dtype=torch.float32, seed=0):
    g = torch.Generator(device=dev).manual_seed(seed)
    a = F.normalize(torch.randn(n, d, generator=g, device=dev, dtype=dtype), dim=1)
    p = F.normalize(a + 0.5 * torch.randn(n, d, generator=g, device=dev, dtype=dtype), dim=1)
    return a.requires_grad_(True), p.requires_grad_(True)


def loss_and_grads(a, p, low=None, **kw):
    a.grad = p.grad = None
    with torch.autocast(dev.type, dtype=low or torch.bfloat16, enabled=low is not None):
        loss = contrastive_loss(a, p, tau=0.05, **kw)
    loss.backward()
    return loss.detach().double(), a.grad.double(), p.grad.double()


# 1. parity: tiled vs dense, and both vs float64
n = min(4096, int(os.environ["CRL_GPU_N"]))
ids = torch.arange(n, device=dev) % (n - 300)
for sym in (True, False):
    for mask in (None, ids):
        a64, p64 = pair(n, dtype=torch.float64)
        ref = loss_and_grads(a64, p64, symmetric=sym, tiling="dense", positive_ids=mask)
        a, p = (t.detach().float().requires_grad_(True) for t in (a64, p64))
        for low, tol in ((None, 1e-4), (torch.bfloat16, 3e-2)):
            got = loss_and_grads(a, p, low, symmetric=sym, tiling="tiled", positive_ids=mask)
            errs = [float((g - r).norm() / r.norm()) for g, r in zip(got, ref)]
            name = f"parity symmetric={sym} ids={mask is not None} {'bf16' if low else 'fp32'}"
            print(f"{name:<45} rel. error loss {errs[0]:.1e} grad_a {errs[1]:.1e} grad_p {errs[2]:.1e}")
            if max(errs) > tol:
                failed.append(name)

# 2. no host synchronisation on the hot path
a, p = pair(n)
for sym in (True, False) if cuda else ():
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        contrastive_loss(a, p, tau=0.05, symmetric=sym, tiling="tiled").backward()
        print(f"no host sync, symmetric={sym}: ok")
    except RuntimeError as error:
        failed.append(f"host sync symmetric={sym}")
        print(f"no host sync, symmetric={sym}: FAILED ({str(error).splitlines()[0]})")
    finally:
        torch.cuda.set_sync_debug_mode("default")


# 3. speed and peak memory at n = m = N
def timed(fn, repeats=5):
    times = []
    for _ in range(repeats + 1):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


N = int(os.environ["CRL_GPU_N"])
a, p = pair(N)
labels = torch.arange(N, device=dev)
x, y = torch.randn(4096, 128, device=dev), torch.randn(128, 4096, device=dev)
count = max(1, 3 * N * N // (4096 * 4096))
gemm = timed(lambda: [torch.mm(x, y) for _ in range(count)]) * 3 * N * N / (count * 4096 * 4096)
print(f"\nn = m = {N}, d = 128: three GEMMs (float32, 4096-blocks) {gemm:.3f} s")


def clip_formula():
    logits = a @ p.T * 20.0
    (0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels))).backward()


cases = {
    "crl symmetric tiled fp32": lambda: contrastive_loss(a, p, tau=0.05, symmetric=True, tiling="tiled").backward(),
    "crl one-sided tiled fp32": lambda: contrastive_loss(a, p, tau=0.05, tiling="tiled").backward(),
    "crl symmetric tiled bf16": lambda: _bf16(),
    "open_clip formula fp32 (dense)": clip_formula,
}


def _bf16():
    with torch.autocast(dev.type, dtype=torch.bfloat16):
        loss = contrastive_loss(a, p, tau=0.05, symmetric=True, tiling="tiled")
    loss.backward()


for name, fn in cases.items():
    a.grad = p.grad = None
    if cuda:
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    try:
        seconds = timed(fn)
    except torch.OutOfMemoryError:
        print(f"{name:<32} out of memory")
        continue
    peak = f"{(torch.cuda.max_memory_allocated() - base) / 2**20:9.0f} MiB" if cuda else "(CUDA only)"
    print(f"{name:<32} {seconds:8.3f} s  {seconds / gemm:6.2f} x bound  peak extra {peak}")

if failed:
    sys.exit(f"FAILED: {', '.join(failed)}")
EOF

if [ "${DEVICE:-cuda}" = cuda ] && [ "$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
"$PYTHON" - <<'EOF'
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from crl.objectives import contrastive_loss


def step(rank: int, world: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
    dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 32).cuda(), device_ids=[rank])
    x = torch.randn(1024, 64, device="cuda", generator=torch.Generator("cuda").manual_seed(rank))
    a = F.normalize(model(x), dim=1)
    p = F.normalize(model(x + 0.1), dim=1)
    gathered = [torch.empty_like(p) for _ in range(world)]
    dist.all_gather(gathered, p.detach())
    gathered[rank] = p
    loss = contrastive_loss(a, p, torch.cat(gathered), tau=0.1, positive_offset=rank * 1024, tiling="tiled")
    loss.backward()
    norm = torch.stack([q.grad.norm() for q in model.parameters()]).sum()
    norms = [torch.zeros_like(norm) for _ in range(world)]
    dist.all_gather(norms, norm)
    if rank == 0:
        same = all(torch.allclose(norms[0], t) for t in norms)
        print(f"DDP nccl step on {world} GPUs: loss {float(loss):.4f}, gradients equal on all ranks: {same}")
    dist.destroy_process_group()


mp.spawn(step, args=(2,), nprocs=2)
EOF
else
  echo "one GPU: DDP nccl step skipped"
fi
