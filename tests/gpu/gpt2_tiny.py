"""A GPT-2 in plain PyTorch (no transformers package needed): the model the GPU tests train.

Sizes default to GPT-2 small's layer shape with fewer layers, so one training step is a few
milliseconds of real GPU work on an H100 while still exercising cuBLAS GEMMs, softmax,
layer norm, GELU, embedding backward and AdamW.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab=50257, ctx=1024, d=768, heads=12, layers=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight
        nn.init.normal_(self.wte.weight, std=0.02)  # GPT-2's initialisation
        nn.init.normal_(self.wpe.weight, std=0.01)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def make(device, layers=2, dtype=torch.bfloat16):
    torch.manual_seed(0)
    model = GPT2(layers=layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    return model, opt


def step(model, opt, batch=4, seq=256, dtype=torch.bfloat16):
    device = next(model.parameters()).device
    idx = torch.randint(0, 50257, (batch, seq + 1), device=device)
    inputs, targets = idx[:, :-1], idx[:, 1:]  # next-token prediction
    with torch.autocast("cuda", dtype=dtype):
        logits = model(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def timed_steps(model, opt, steps=10, warmup=3, **kw):
    """Median step time in ms, measured with CUDA events as a user's own script would."""
    for _ in range(warmup):
        step(model, opt, **kw)
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step(model, opt, **kw)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]
