#!/usr/bin/env bash
# Session 2026-11-26h, call 4: does vgpu's cheap CPU-time estimate overcharge FSDP2's host phases?
# FSDP2 on 2 ranks: real, vgpu (estimate), vgpu with VGPU_CPU_CLOCK=exact, each with the clock report.
# Also: the host's CPU topology and whether perf_event_open's task clock is allowed (a CPU clock
# without a system call).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|NUMA node|Model name|MHz"; cat /proc/sys/kernel/perf_event_paranoid
python3 - <<'PY'
import ctypes, struct, os
libc = ctypes.CDLL(None, use_errno=True)
# struct perf_event_attr: type=PERF_TYPE_SOFTWARE(1), size=128, config=PERF_COUNT_SW_TASK_CLOCK(1), exclude_kernel etc. 0
attr = bytearray(128); struct.pack_into("IIQ", attr, 0, 1, 128, 1)
buf = (ctypes.c_char * 128).from_buffer(attr)
fd = libc.syscall(298, buf, 0, -1, -1, 0)
print("perf_event_open task-clock:", fd, os.strerror(ctypes.get_errno()) if fd < 0 else "ok")
PY
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model $model --no-summary)
timeout 90 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 > $O/real.log 2>&1
echo "real t=$((SECONDS-T0))"
VGPU_PHYSICAL_DEVICES=0 VGPU_CLOCK_REPORT=$O/est_%p.jsonl timeout 150 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 > $O/est.log 2>&1
echo "est t=$((SECONDS-T0))"
VGPU_CPU_CLOCK=exact VGPU_PHYSICAL_DEVICES=0 VGPU_CLOCK_REPORT=$O/exact_%p.jsonl timeout 150 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 > $O/exact.log 2>&1
echo "exact t=$((SECONDS-T0))"
for f in real est exact; do echo "== $f"; grep RESULT $O/$f.log | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline()[7:]); print(d['step_ms'], 'gpu phases', d['forward_ms'], d['backward_ms'], d['optimizer_ms'], 'wall', d['wall_ms'])
for r in d['ranks_host_ms']: print('  ', r)"; done
for f in $O/est_*.jsonl $O/exact_*.jsonl; do echo $f; cut -c1-330 $f | grep -v '"calls": [0-9],'; done
cd $OUT && tar czf all.tgz r
