"""An nccl-tests-style sweep through torch.distributed (NCCL), one rank per GPU:

    torchrun --nproc_per_node N tests/gpu/nccl_sweep.py [all_reduce|all_gather] [min_mib] [max_mib]
    python3 tests/gpu/nccl_sweep.py [all_reduce|all_gather] [min_mib] [max_mib]   # one process

Without torchrun (no RANK in the environment) one process drives every visible GPU, as
nccl-tests' single-process mode does: torch.cuda.nccl's communicators (ncclCommInitAll) and one
group call per collective. Under vgpu that puts all ranks' NCCL kernels in one process, where
they run side by side on the physical GPU instead of time-slicing between processes; the time
reported is the slowest device's.

Prints, on rank 0, nccl-tests' columns: size (B), count (float32 elements), time (us, mean of
`iters` after `warmup`, measured with CUDA events around the loop), algbw and busbw (GB/s; busbw
= algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather). As in nccl-tests, an all-gather's
size and count are those of the gathered output (each rank sends size / n). The same script runs
on real GPUs and under vgpu-run, so the two tables compare line by line.
"""
import os
import sys

import torch
import torch.distributed as dist


def sizes(lo, hi):
    mib = lo
    while mib <= hi:
        yield mib
        mib *= 4


def header(op, world):
    print(f"# {op}, {world} ranks, float32, NCCL {torch.cuda.nccl.version()}")
    print(f"#{'size':>12s} {'count':>12s} {'time(us)':>10s} {'algbw':>8s} {'busbw':>8s}")


def per_rank_count(op, world, size):
    """Elements each rank sends: all of `size` for an all-reduce, its 1/world share of the
    gathered output for an all-gather."""
    return size // 4 // world if op == "all_gather" else size // 4


def row(op, world, size, us):
    algbw = size / us / 1e3
    factor = 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
    print(f" {size:12d} {size // 4:12d} {us:10.1f} {algbw:8.2f} {algbw * factor:8.2f}", flush=True)


def iterations(mib):
    return (20, 5) if mib <= 64 else (5, 2)


def single_process(op, lo, hi):
    import torch.cuda.nccl as nccl
    world = torch.cuda.device_count()
    devices = list(range(world))
    header(op, world)
    for mib in sizes(lo, hi):
        size = mib << 20
        count = per_rank_count(op, world, size)
        xs = [torch.ones(count, device=f"cuda:{d}") for d in devices]
        outs = [torch.empty(count * world, device=f"cuda:{d}") for d in devices] if op == "all_gather" else None
        iters, warmup = iterations(mib)

        def run():
            if op == "all_gather":
                nccl.all_gather(xs, outs)
            else:
                nccl.all_reduce(xs)

        for _ in range(warmup):
            run()
        for d in devices:
            torch.cuda.synchronize(d)
        begin, end = [], []
        for d in devices:
            with torch.cuda.device(d):
                begin.append(torch.cuda.Event(enable_timing=True))
                end.append(torch.cuda.Event(enable_timing=True))
                begin[-1].record()
        for _ in range(iters):
            run()
        for d in devices:
            with torch.cuda.device(d):
                end[d].record()
        for e in end:
            e.synchronize()
        us = max(begin[d].elapsed_time(end[d]) for d in devices) * 1e3 / iters
        row(op, world, size, us)
        del xs, outs


def main():
    op = sys.argv[1] if len(sys.argv) > 1 else "all_reduce"
    lo = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    hi = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    if "RANK" not in os.environ:
        single_process(op, lo, hi)
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    if rank == 0:
        header(op, world)
    for mib in sizes(lo, hi):
        size = mib << 20
        count = per_rank_count(op, world, size)
        x = torch.ones(count, device="cuda")
        out = torch.empty(count * world, device="cuda") if op == "all_gather" else None
        iters, warmup = iterations(mib)

        def run():
            if op == "all_gather":
                dist.all_gather_into_tensor(out, x)
            else:
                dist.all_reduce(x)

        for _ in range(warmup):
            run()
        torch.cuda.synchronize()
        dist.barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            run()
        b.record()
        b.synchronize()
        us = a.elapsed_time(b) * 1e3 / iters
        if rank == 0:
            row(op, world, size, us)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
