"""One NCCL all-reduce between the ranks of a torchrun job, for the GPU machine:

    vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin -- \
        torchrun --nproc_per_node 2 tests/tools/torch_allreduce.py

Each rank fills 4 MiB with rank+1 and all-reduces it (sum); prints PASS/FAIL and the time its
CUDA events measured. Exit status 1 on a wrong sum."""
import os
import sys

import torch
import torch.distributed as dist


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    x = torch.full((1 << 20,), float(rank + 1), device="cuda")
    dist.all_reduce(x)  # the first one also connects the ranks
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    x.fill_(float(rank + 1))
    start.record()
    dist.all_reduce(x)
    end.record()
    torch.cuda.synchronize()
    expected = world * (world + 1) / 2
    ok = bool(torch.all(x == expected).item())
    print(f"rank {rank}/{world} on cuda:{local}: all_reduce of 4 MiB {'PASS' if ok else 'FAIL'} "
          f"(value {x[0].item():g}, expected {expected:g}), {start.elapsed_time(end):.3f} ms by "
          "CUDA events", flush=True)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
