"""The values torch.distributed's NCCL collectives leave on the sim backend (issue 23: the sim
backend moves the data of collectives up to VGPU_SIM_NCCL_DATA_BYTES per rank): all_reduce (sum,
and the barrier), all_gather_into_tensor, broadcast, reduce_scatter_tensor of small tensors in
float32, bfloat16 and int64 (DDP's parameter-shape check all-gathers int64), then DDP's wrap of a
small model, whose start-up checks used to fail ("DDP expects same model across all ranks").
Prints "ok   <what>" or "FAIL <what>: ..." per check on each rank; exits 1 on any FAIL.

    vgpu-run --backend sim --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/sim_torch_collectives.py
"""
import os
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dev = torch.device("cuda")
    failures = 0

    def check(ok, what, detail=""):
        nonlocal failures
        print(f"rank {rank} " + ("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"), flush=True)
        failures += not ok

    n = 1000
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        j = torch.arange(n, device=dev) % 7 + 1
        t = (j * (rank + 1)).to(dtype)
        dist.all_reduce(t)
        want = (j * (world * (world + 1) // 2)).to(dtype)
        check(torch.equal(t, want), f"all_reduce sum {dtype}", f"{t[:4].tolist()} want {want[:4].tolist()}")

        mine = torch.full((n,), rank + 1, device=dev).to(dtype)
        out = torch.empty(world * n, device=dev).to(dtype)
        dist.all_gather_into_tensor(out, mine)
        want = torch.arange(1, world + 1, device=dev).repeat_interleave(n).to(dtype)
        check(torch.equal(out, want), f"all_gather {dtype}", f"{out[::n].tolist()}")

        b = (torch.arange(n, device=dev) % 5 + 42).to(dtype) if rank == 0 else torch.zeros(n, device=dev).to(dtype)
        dist.broadcast(b, src=0)
        check(torch.equal(b, (torch.arange(n, device=dev) % 5 + 42).to(dtype)), f"broadcast {dtype}", f"{b[:4].tolist()}")

        s = torch.full((world * n,), rank + 1, device=dev).to(dtype)
        r = torch.empty(n, device=dev).to(dtype)
        dist.reduce_scatter_tensor(r, s)
        check(torch.equal(r, torch.full((n,), world * (world + 1) // 2, device=dev).to(dtype)),
              f"reduce_scatter {dtype}", f"{r[:4].tolist()}")

    dist.barrier()
    check(True, "barrier")

    # DDP's start-up: the parameter shapes all-gathered and checked, the parameters broadcast.
    torch.manual_seed(rank)  # different on purpose: DDP's broadcast from rank 0 must make them equal
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(dev)
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index or 0])
        check(True, "DDP wrap")
        w = ddp.module[0].weight.detach().clone()
        ws = [torch.empty_like(w) for _ in range(world)]
        dist.all_gather(ws, w)
        check(all(torch.equal(ws[0], x) for x in ws), "DDP broadcast the parameters of rank 0 to every rank")
        loss = ddp(torch.randn(4, 64, device=dev)).sum()
        loss.backward()
        g = ddp.module[2].bias.grad.detach().clone()
        gs = [torch.empty_like(g) for _ in range(world)]
        dist.all_gather(gs, g)
        check(all(torch.allclose(gs[0], x) for x in gs), "DDP's gradients all-reduced to the same values on every rank")
    except RuntimeError as e:
        check(False, "DDP wrap", str(e)[:300])
    dist.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
