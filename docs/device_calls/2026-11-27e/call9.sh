#!/usr/bin/env bash
# Planned by the fourteenth session (its device time was spent) and run as the fifteenth session's
# first call, with the real DDP step and the real FSDP2 step over NCCL's socket transport added. The tree with callcost11 and simcore19
# merged and the multi-tensor-apply struct cleaned in signatures (678f7d1), none of it yet on a GPU: the
# call-overhead bench (7 rounds, GPU 0), then launches measured per step (VGPU_LAUNCH_STATS) of the
# 2-rank FSDP2 and DDP steps under vgpu (12 steps, 3 warm-up), the real FSDP2 step beside.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 70 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 7 > $O/bench.txt 2>&1
tail -9 $O/bench.txt; echo "== bench t=$((SECONDS-T0))"
source tests/gpu/vgpu_env.sh
for mode in fsdp2 ddp; do
  VGPU_PHYSICAL_DEVICES=0 timeout 90 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py $mode --steps 12 --warmup 3 > $O/${mode}_vgpu.log 2>&1
done
timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --steps 12 --warmup 3 > $O/fsdp2_real.log 2>&1
timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp --steps 12 --warmup 3 > $O/ddp_real.log 2>&1
# Does a host whose NCCL moves every collective through host memory with proxy threads (what
# vgpu's plugin makes NCCL do) slow the real job's host phases? The real job over NCCL's socket
# transport on the loopback, NVLink and shared memory off.
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo timeout 90 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --steps 12 --warmup 3 > $O/fsdp2_realsock.log 2>&1
for f in $O/*_vgpu.log $O/*_real*.log; do
  echo "$(basename $f): $(grep RESULT $f | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()[7:]); print(r["step_ms"], "phases", r["forward_ms"], r["backward_ms"], r["optimizer_ms"], "host", r["ranks_host_ms"])' 2>&1 | cut -c1-600)"
done
for f in $O/*_vgpu.log $O/fsdp2_real.log; do echo "$(basename $f): $(grep RESULT $f | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()[7:]); print(r["step_ms"], "cpu", r.get("ranks_process_cpu_ms"), "measured", r.get("ranks_measured_per_step"), "launches", r.get("launches_per_step"))' 2>&1 | cut -c1-600)"; done
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
