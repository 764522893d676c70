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
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    failures = 0

    def check(ok, what, detail=""):
        nonlocal failures
        print(f"rank {rank} " + ("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"), flush=True)
        failures += not ok

    # The sim backend runs no kernel: every input is made on the host and copied in (a copy the
    # sim backend performs), and every result is copied out and compared on the host.
    def on_gpu(t):
        return t.to(dev)

    n = 1000
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        j = torch.arange(n) % 7 + 1
        t = on_gpu((j * (rank + 1)).to(dtype))
        dist.all_reduce(t)
        got, want = t.cpu(), (j * (world * (world + 1) // 2)).to(dtype)
        check(torch.equal(got, want), f"all_reduce sum {dtype}", f"{got[:4].tolist()} want {want[:4].tolist()}")

        mine = on_gpu(torch.full((n,), rank + 1).to(dtype))
        out = on_gpu(torch.zeros(world * n, dtype=dtype))
        dist.all_gather_into_tensor(out, mine)
        got, want = out.cpu(), torch.arange(1, world + 1).repeat_interleave(n).to(dtype)
        check(torch.equal(got, want), f"all_gather {dtype}", f"{got[::n].tolist()}")

        src = (torch.arange(n) % 5 + 42).to(dtype)
        b = on_gpu(src if rank == 0 else torch.zeros(n, dtype=dtype))
        dist.broadcast(b, src=0)
        got = b.cpu()
        check(torch.equal(got, src), f"broadcast {dtype}", f"{got[:4].tolist()}")

        s = on_gpu(torch.full((world * n,), rank + 1).to(dtype))
        r = on_gpu(torch.zeros(n, dtype=dtype))
        dist.reduce_scatter_tensor(r, s)
        got = r.cpu()
        check(torch.equal(got, torch.full((n,), world * (world + 1) // 2).to(dtype)), f"reduce_scatter {dtype}",
              f"{got[:4].tolist()}")

    dist.barrier()
    check(True, "barrier")

    # DDP's start-up: the parameter shapes all-gathered and checked, the parameters broadcast.
    torch.manual_seed(rank)  # different on purpose: DDP's broadcast from rank 0 must make them equal
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(dev)
    try:
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
        check(True, "DDP wrap")
        w = ddp.module[0].weight.detach()
        ws = on_gpu(torch.zeros((world,) + tuple(w.shape)))
        dist.all_gather_into_tensor(ws, w.contiguous())
        ws = ws.cpu()
        check(all(torch.equal(ws[0], x) for x in ws), "DDP broadcast the parameters of rank 0 to every rank")
        # A step runs to the end (its values are the sim backend's: kernels are not executed).
        loss = ddp(on_gpu(torch.randn(4, 64))).sum()
        loss.backward()
        torch.cuda.synchronize()
        check(True, "DDP forward and backward")
    except RuntimeError as e:
        check(False, "DDP wrap", str(e)[:300])
    dist.destroy_process_group()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
