"""What a PyTorch training step reaches of NVIDIA's libraries, op by op, on the sim backend (no
kernel runs there: values are whatever the buffers hold; what counts is that every call returns
and takes a plausible virtual time). Run by tests/gpu/sim_torch under
`vgpu-run --backend sim --gpus 2`; the same library paths are covered in CI by the C programs
tests/programs/cublas_program.cu (cuBLAS, cuBLASLt), cufft_program.cu (cuFFT) and
cudnn_program.cu (cuDNN).

Prints one line per op: "ok   <op>: <virtual ms>" or "FAIL <op>: <error>", then
"ops: <n> ok, <m> failed"; exits with the number of failures (0: all ran).
"""
import sys
import time
import traceback

import torch
import torch.nn.functional as F

failures = 0
ran = 0


def op(name, fn, floor_ms=0.0):
    """Runs fn() on GPU 0 between two CUDA events; fails on an exception or a virtual time below
    floor_ms (the hardware's roofline for the op: no GPU runs it faster)."""
    global failures, ran
    ran += 1
    try:
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ms = e0.elapsed_time(e1)
        if ms < floor_ms - 1e-3:  # CUDA events resolve about half a microsecond
            raise RuntimeError(f"{ms:.4f} ms virtual beats the roofline ({floor_ms:.4f} ms)")
        print(f"ok   {name}: {ms:.4f} ms virtual", flush=True)
    except Exception as e:  # every failure is reported, the next op still runs
        failures += 1
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        print(f"FAIL {name}: {last[:400]}", flush=True)


def main():
    t0 = time.perf_counter()
    n = torch.cuda.device_count()
    print(f"{'ok  ' if n == 2 else 'FAIL'} devices: {n} ({torch.cuda.get_device_name(0)})", flush=True)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    m = 4096
    a32 = torch.randn(m, m, device=dev)
    a16 = a32.to(torch.bfloat16)
    # H100 dense peaks: 67 TFLOP/s FP32 (no TF32: allow_tf32 is off by default for matmul),
    # 989.5 TFLOP/s BF16; 3.35 TB/s of HBM.
    flops = 2 * m ** 3
    op("matmul fp32 4096^3 (cuBLAS)", lambda: a32 @ a32, flops / 67e12 * 1e3)
    op("matmul bf16 4096^3 (cuBLASLt)", lambda: a16 @ a16, flops / 989.5e12 * 1e3)
    lin = torch.nn.Linear(m, m, device=dev, dtype=torch.bfloat16)
    op("linear bf16 with bias (cuBLASLt epilogue)", lambda: lin(a16), flops / 989.5e12 * 1e3)
    x = torch.randn(1 << 22, device=dev, dtype=torch.complex64)
    op("fft 2^22 complex64 (cuFFT)", lambda: torch.fft.fft(x))
    op("rfft 64 x 2^14 (cuFFT)", lambda: torch.fft.rfft(torch.randn(64, 1 << 14, device=dev)))
    img = torch.randn(32, 64, 56, 56, device=dev, requires_grad=True)
    conv = torch.nn.Conv2d(64, 64, 3, padding=1, device=dev)
    op("conv2d forward+backward fp32 (cuDNN)", lambda: conv(img).sum().backward())
    with torch.autocast("cuda", dtype=torch.bfloat16):
        op("conv2d bf16 autocast (cuDNN)", lambda: conv(img))
    q = torch.randn(8, 12, 1024, 64, device=dev, dtype=torch.bfloat16, requires_grad=True)
    op("scaled_dot_product_attention causal fwd+bwd", lambda: F.scaled_dot_product_attention(
        q, q, q, is_causal=True).sum().backward())
    h = torch.randn(8192, 768, device=dev, requires_grad=True)
    ln = torch.nn.LayerNorm(768, device=dev)
    op("layer_norm + gelu + cross_entropy fwd+bwd", lambda: F.cross_entropy(
        F.gelu(ln(h)), torch.randint(0, 768, (8192,), device=dev)).backward())
    params = [torch.nn.Parameter(torch.randn(1 << 20, device=dev)) for _ in range(8)]
    for p in params:
        p.grad = torch.randn_like(p)
    adam = torch.optim.AdamW(params, fused=True)
    op("AdamW fused step, 8 x 2^20", adam.step)
    op("copy 256 MiB device to device", lambda: torch.empty(1 << 26, device=dev).copy_(
        torch.empty(1 << 26, device=dev)), 2 * (1 << 28) / 3.35e12 * 1e3)
    torch.cuda.set_device(1)
    op("matmul bf16 on GPU 1", lambda: torch.randn(1024, 1024, device="cuda:1", dtype=torch.bfloat16).matmul(
        torch.randn(1024, 1024, device="cuda:1", dtype=torch.bfloat16)))
    print(f"ops: {ran - failures} ok, {failures} failed ({time.perf_counter() - t0:.1f} s wall)", flush=True)
    return failures


if __name__ == "__main__":
    sys.exit(main())
