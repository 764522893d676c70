#!/usr/bin/env bash
# Fourteenth session, call 6: is FSDP2's excess under vgpu (+10% in call 5, the same with
# VGPU_MEASURE=concurrent) the NCCL proxies' memory traffic slowing the ranks' own CPU work? Under
# vgpu each rank's proxy thread copies every collective's data through host shared memory (call 4:
# the busiest thread of each process, in libc's memcpy). (a) the real job alone and beside two
# processes that copy 1 MiB buffers in a loop (the same kind of traffic, without vgpu); (b) vgpu
# as is and with glibc's memcpy told to use non-temporal stores from 64 KiB (the proxies' copies
# then bypass the caches). FSDP2 2 ranks, 20 steps, 3 warm-up.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L
source tests/gpu/vgpu_env.sh
a=(tests/gpu/fidelity/train_step.py fsdp2 --steps 20 --warmup 3)
hammer() { python3 -c '
import numpy as np, time
a = np.ones(1 << 18, dtype=np.float32); b = np.empty_like(a); t = time.time()
while time.time() - t < 60: np.copyto(b, a); np.copyto(a, b)' & }
for i in 1 2; do
  timeout 100 torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/real_$i.log 2>&1
  hammer; h1=$!; hammer; h2=$!
  timeout 100 torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/real_hammer_$i.log 2>&1
  kill $h1 $h2 2>/dev/null; wait $h1 $h2 2>/dev/null
  VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/vgpu_$i.log 2>&1
  GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold=0x10000 VGPU_PHYSICAL_DEVICES=0 timeout 150 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 "${a[@]}" > $O/vgpu_nt_$i.log 2>&1
  echo "round $i t=$((SECONDS-T0))"
done
for f in $O/*.log; do echo "$(basename $f): $(grep RESULT $f | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()[7:]); print(r["step_ms"], "wall", r["wall_ms"], "cpu", r.get("ranks_process_cpu_ms"), "host", r["ranks_host_ms"])' 2>&1 | cut -c1-400)"; done
cd $OUT && tar czf all.tgz r
