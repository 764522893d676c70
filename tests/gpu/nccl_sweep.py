"""An nccl-tests-style sweep through torch.distributed (NCCL), one rank per GPU:

    torchrun --nproc_per_node N tests/gpu/nccl_sweep.py [all_reduce|all_gather] [min_mib] [max_mib]

Prints, on rank 0, nccl-tests' columns: size (B), count (elements, bf16... here float32), time
(us, mean of `iters` after `warmup`, measured with CUDA events around the loop), algbw and busbw
(GB/s; busbw = algbw x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather). The same script runs
on real GPUs and under vgpu-run, so the two tables compare line by line.
"""
import os
import sys

import torch
import torch.distributed as dist


def main():
    op = sys.argv[1] if len(sys.argv) > 1 else "all_reduce"
    lo = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    hi = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    if rank == 0:
        print(f"# {op}, {world} ranks, float32, NCCL {torch.cuda.nccl.version()}")
        print(f"#{'size':>12s} {'count':>12s} {'time(us)':>10s} {'algbw':>8s} {'busbw':>8s}")
    mib = lo
    while mib <= hi:
        size = mib << 20
        count = size // 4
        x = torch.ones(count, device="cuda")
        out = torch.empty(count * world, device="cuda") if op == "all_gather" else None
        iters, warmup = (20, 5) if mib <= 64 else (5, 2)

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
        algbw = size / us / 1e3
        factor = 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
        if rank == 0:
            print(f" {size:12d} {count:12d} {us:10.1f} {algbw:8.2f} {algbw * factor:8.2f}", flush=True)
        mib *= 4
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
