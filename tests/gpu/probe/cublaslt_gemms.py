"""The bf16 GEMMs of a GPT-2 124M training step on one rank (batch 8 x 1024 tokens), forward and
backward under autocast, as the model's nn.Linear layers call them (F.linear: qkv 768 -> 2304,
proj 768 -> 768, fc 768 -> 3072, out 3072 -> 768, the LM head 768 -> 50257 without bias).
What cuBLASLt picks for each, and what it asked the driver first, is what
tests/gpu/probe/cublaslt_queries compares between the passthrough and the sim backend.

    python3 cublaslt_gemms.py [TOKENS]      (default 8192)
"""
import sys

import torch
import torch.nn.functional as F

tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 8 * 1024
d = 768
layers = [("qkv", d, 3 * d, True), ("proj", d, d, True), ("fc", d, 4 * d, True), ("out", 4 * d, d, True),
          ("head", d, 50257, False)]
dev = torch.device("cuda", 0)
torch.manual_seed(0)
for name, k, n, bias in layers:
    x = torch.randn(tokens, k, device=dev, requires_grad=True)
    w = torch.randn(n, k, device=dev, requires_grad=True)
    b = torch.zeros(n, device=dev, requires_grad=True) if bias else None
    for _ in range(2):  # the second pass reuses cuBLASLt's cached choice, as a training loop does
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = F.linear(x, w, b)
        y.backward(torch.ones_like(y))  # dX = dY W and dW = dY^T X, both bf16 GEMMs
    torch.cuda.synchronize()
    print(f"gemm {name}: [{tokens}, {k}] x [{k}, {n}] forward and backward ok", flush=True)
print("cublaslt_gemms: done")
