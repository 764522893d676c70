"""A data-parallel GPT-2 training step, one rank per GPU, timed by the job's own CUDA events:

    torchrun --nproc_per_node N tests/gpu/ddp_gpt2.py [layers] [batch] [seq]

GPT-2 small by default (12 layers, d=768, 124M parameters), batch 8 per rank, sequence 1024,
bf16 autocast, fused AdamW; DistributedDataParallel all-reduces the gradients over NCCL while
the backward pass runs. Rank 0 prints the median step time over the timed steps (STEP_MS) and
the loss. The same script runs on real GPUs and under vgpu-run, so the two compare directly.
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(__file__))
import gpt2_tiny  # noqa: E402


def main():
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    seq = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=device)
    model, _ = gpt2_tiny.make(device, layers=layers)
    ddp = DDP(model, device_ids=[local])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=True)
    ms = gpt2_tiny.timed_steps(ddp, opt, steps=8, warmup=4, batch=batch, seq=seq)
    loss = gpt2_tiny.step(ddp, opt, batch=batch, seq=seq).item()
    t = torch.tensor([ms], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"DDP GPT-2 {layers} layers, {world} ranks, batch {batch} x {seq} per rank: "
              f"STEP_MS {t.item():.3f} (slowest rank's median) loss {loss:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
