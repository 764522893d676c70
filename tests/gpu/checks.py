"""GPU checks of vgpu, one per command-line name; each prints `PASS name: ...` or
`FAIL name: ...` and exits non-zero on failure. Run by tests/gpu/run-gpu-tests."""
import json
import os
import sys
import time

EXPECTED = json.loads(os.environ.get("VGPU_EXPECT", "{}"))  # count, name, total_mem


def report(ok, name, text):
    print(f"{'PASS' if ok else 'FAIL'} {name}: {text}", flush=True)
    if not ok:
        sys.exit(1)


def devices():
    import torch
    n = torch.cuda.device_count()
    props = [torch.cuda.get_device_properties(i) for i in range(n)]
    names = {p.name for p in props}
    mems = {p.total_memory for p in props}
    free, total = torch.cuda.mem_get_info(n - 1)
    text = f"{n} devices, names {sorted(names)}, total_memory {sorted(mems)}, device {n-1} free {free} of {total}"
    ok = (n == EXPECTED.get("count", n) and names == {EXPECTED.get("name", props[0].name)}
          and mems == {EXPECTED.get("total_mem", props[0].total_memory)})
    report(ok, "devices", text)


def gpt2_every_device():
    import torch
    import gpt2_tiny
    n = torch.cuda.device_count()
    losses = []
    t0 = time.time()
    for d in range(n):
        with torch.cuda.device(d):
            model, opt = gpt2_tiny.make(f"cuda:{d}")
            loss = gpt2_tiny.step(model, opt)
            torch.cuda.synchronize()
            losses.append(round(float(loss), 4))
            del model, opt
    ok = len(losses) == n and all(l == l and 5 < l < 20 for l in losses)
    report(ok, "gpt2_every_device", f"one training step on each of {n} devices, losses {losses}, {time.time()-t0:.1f} s")


def gpt2_rank(rank):
    import torch
    import gpt2_tiny
    torch.cuda.set_device(rank)
    model, opt = gpt2_tiny.make(f"cuda:{rank}")
    loss = float(gpt2_tiny.step(model, opt))
    torch.cuda.synchronize()
    ok = 5 < loss < 20 and torch.cuda.current_device() == rank
    print(f"rank {rank}: loss {loss:.4f} on device {torch.cuda.current_device()}", flush=True)
    sys.exit(0 if ok else 1)


def triton_kernel():
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(out + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

    d = torch.cuda.device_count() - 1
    x = torch.rand(1 << 20, device=f"cuda:{d}")
    y = torch.rand(1 << 20, device=f"cuda:{d}")
    out = torch.empty_like(x)
    with torch.cuda.device(d):
        add[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    err = (out - (x + y)).abs().max().item()
    report(err == 0, "triton", f"vector add on device {d}, max error {err}")


def jax_devices():
    import jax
    import jax.numpy as jnp
    devs = jax.devices()
    gpus = [d for d in devs if d.platform == "gpu"]
    x = jnp.arange(1 << 16, dtype=jnp.float32)
    sums = [float(jax.device_put(x, d).sum()) for d in gpus]
    expect = float((1 << 16) * ((1 << 16) - 1) / 2)
    ok = len(gpus) == EXPECTED.get("count", len(gpus)) and all(s == expect for s in sums)
    report(ok, "jax", f"{len(gpus)} GPU devices ({gpus[0].device_kind if gpus else '-'}), sums on each {'ok' if ok else sums}")


def step_time():
    """One device, the user's own CUDA-event timing: printed for the run-gpu-tests comparison."""
    import torch
    import gpt2_tiny
    model, opt = gpt2_tiny.make("cuda:0", layers=4)
    ms = gpt2_tiny.timed_steps(model, opt, steps=30, warmup=5, batch=8, seq=512)
    print(f"STEP_MS {ms:.4f}", flush=True)


def free_at_start():
    """What a framework sees first: the free memory of device 0 (and of the last device)."""
    import torch
    n = torch.cuda.device_count()
    free0, total0 = torch.cuda.mem_get_info(0)
    print(f"FREE {free0} {total0} last {torch.cuda.mem_get_info(n - 1)[0]}", flush=True)


def oom_batch():
    """The largest GPT-2 (12 layers, seq 1024, bf16) batch whose training step fits device 0."""
    import torch
    import gpt2_tiny
    model, opt = gpt2_tiny.make("cuda:0", layers=12)

    def fits(batch):
        try:
            gpt2_tiny.step(model, opt, batch=batch, seq=1024)
            torch.cuda.synchronize()
            return True
        except torch.cuda.OutOfMemoryError:
            return False
        finally:
            opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()

    lo, hi = 0, 8
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    print(f"MAX_BATCH {lo}", flush=True)


def shared_pages_step():
    """Eight virtual devices each holding more than an eighth of the physical memory train."""
    import torch
    import gpt2_tiny
    n = torch.cuda.device_count()
    phys = int(os.environ["VGPU_PHYSICAL_TOTAL"])
    hold = phys // n + (4 << 30)
    held, losses = [], []
    for d in range(n):
        held.append(torch.empty(hold, dtype=torch.uint8, device=f"cuda:{d}"))
        model, opt = gpt2_tiny.make(f"cuda:{d}")
        losses.append(float(gpt2_tiny.step(model, opt)))
        torch.cuda.synchronize(d)
    total = sum(t.numel() for t in held)
    ok = len(losses) == n and total > phys
    report(ok, "shared_pages", f"{n} devices each holding {hold / 2**30:.1f} GiB ({total / 2**30:.0f} GiB in all on a "
                               f"{phys / 2**30:.0f} GiB GPU) ran a training step (losses are meaningless here)")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    name = sys.argv[1]
    if name == "gpt2_rank":
        gpt2_rank(int(sys.argv[2]))
    else:
        globals()[name]()
