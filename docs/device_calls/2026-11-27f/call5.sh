#!/usr/bin/env bash
# Fifteenth session, call 5 (the merged tree: callcost12, simcore20, sim23): the call-overhead bench (5
# rounds, GPU 0); nccl-tests all_gather real and under vgpu (sim23's profiler now hands the driver its
# hooks when a communicator opens, so the passthrough charges NCCL's host model from the first group);
# then where FSDP2's virtual step comes from: under vgpu with VGPU_CLOCK_REPORT (the timed steps only:
# each thread's CPU, driver, synchronization, poll, horizon, hand-over and NCCL-model time) and
# VGPU_HOST_SAMPLES (where the threads' CPU goes), beside the real step, 20 steps, each rank on 8 cores,
# the host probe before every step.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/samples
nvidia-smi -L
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 100 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 5 > $O/bench.txt 2>&1
tail -9 $O/bench.txt; echo "== bench t=$((SECONDS-T0))"
source tests/gpu/vgpu_env.sh
LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 40 .gpu/nccl-tests/all_gather_perf -g 2 -b 64K -e 16M -f 4 -n 20 -w 5 > $O/ag_real.log 2>&1
VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 60 "${vrun[@]}" --gpus 2 -- .gpu/nccl-tests/all_gather_perf -g 2 -b 64K -e 16M -f 4 -n 20 -w 5 > $O/ag_vgpu.log 2>&1
for s in real vgpu; do echo "all_gather $s"; grep -E "^ +[0-9]" $O/ag_$s.log; done
echo "== nccl t=$((SECONDS-T0))"
export PIN_CORES_PER_RANK=8
timeout 50 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --steps 20 --warmup 3 > $O/fsdp2_real.log 2>&1
VGPU_CLOCK_REPORT=$O/clock_%p.jsonl VGPU_HOST_SAMPLES=$O/samples/%p.jsonl VGPU_PHYSICAL_DEVICES=0 timeout 80 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --steps 20 --warmup 3 > $O/fsdp2_vgpu.log 2>&1
echo "== fsdp2 t=$((SECONDS-T0))"
for f in $O/fsdp2_real.log $O/fsdp2_vgpu.log; do
  echo "$(basename $f): $(grep RESULT $f | python3 -c '
import json,sys; r=json.loads(sys.stdin.read()[7:]); med=lambda v: sorted(v)[len(v)//2]
print(r["step_ms"], "probe", [round(med(p),2) for p in r["ranks_probe_ms"]], "host", [[round(x,1) for x in h] for h in r["ranks_host_ms"]])' 2>&1 | cut -c1-400)"
done
python3 - "$O" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/clock_*.jsonl")):
    for line in open(f):
        t = json.loads(line)
        if t.get("cpu_s", 0) > 0.05:
            print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in t.items()})
for f in sorted(glob.glob(sys.argv[1] + "/samples/*.jsonl")):
    for line in open(f):
        p = json.loads(line)
        for t in sorted(p["threads"], key=lambda t: -t["samples"])[:3]:
            libs = sorted(t["libs"].items(), key=lambda kv: -kv[1])[:8]
            print(p["pid"], t["tid"], t["name"], t["samples"], libs)
            for c, st in t["stacks"][:4]:
                print("   ", c, st[:300])
PY
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
