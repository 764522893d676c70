#!/usr/bin/env bash
# Sixteenth session, call 2 (issue 18): call 1 read FSDP2 under vgpu +19% / +22% over the real step in
# two of three pairs with each rank on 4 CPUs (PIN_CORES_PER_RANK=4), -1.9% in the third. Is it vgpu's
# cheap CPU-time estimate (outside_cpu_time.h: a short stretch is charged its wall time; a thread
# preempted there, which more threads on fewer cores make likelier, is overcharged until the next
# exact reading, and a long call's exit reading does not take it back)? FSDP2 real, vgpu as is and
# vgpu with VGPU_CPU_CLOCK=exact (every entry and exit reads the thread's CPU clock), alternated, each
# rank on 4 CPUs, with VGPU_CLOCK_REPORT (each thread's charged CPU and the CPU it really used).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L
source tests/gpu/vgpu_env.sh
export PIN_CORES_PER_RANK=4
summ() { grep RESULT $1 | python3 -c '
import json,sys; r=json.loads(sys.stdin.read()[7:]); med=lambda v: sorted(v)[len(v)//2]
print(r["step_ms"], "steps", min(r["steps_ms"]), max(r["steps_ms"]), "probe", [round(med(p),2) for p in r["ranks_probe_ms"]], "host", [[round(x,1) for x in h] for h in r["ranks_host_ms"]])' 2>&1 | cut -c1-400; }
real() { timeout 50 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --steps 20 --warmup 3 > $O/fsdp2_real_$1.log 2>&1; echo "real $1: $(summ $O/fsdp2_real_$1.log) t=$((SECONDS-T0))"; }
vg() { mkdir -p $O/clock_$1; env $2 VGPU_CLOCK_REPORT=$O/clock_$1/%p.jsonl VGPU_PHYSICAL_DEVICES=0 timeout 90 "${vrun[@]}" --gpus 2 -- torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py fsdp2 --steps 20 --warmup 3 > $O/fsdp2_vgpu_$1.log 2>&1; echo "vgpu $1 ($2): $(summ $O/fsdp2_vgpu_$1.log) t=$((SECONDS-T0))"; }
real 1; vg est1 VGPU_CPU_CLOCK=estimated; vg exact1 VGPU_CPU_CLOCK=exact
real 2; vg exact2 VGPU_CPU_CLOCK=exact; vg est2 VGPU_CPU_CLOCK=estimated
real 3
python3 - "$O" <<'PY'
import glob, json, os, sys
for d in sorted(glob.glob(sys.argv[1] + "/clock_*")):
    for f in sorted(glob.glob(d + "/*.jsonl")):
        for line in open(f):
            t = json.loads(line)
            if t.get("cpu_s", 0) > 0.05:
                print(os.path.basename(d), {k: (round(v, 3) if isinstance(v, float) else v) for k, v in t.items()})
PY
cd $OUT && tar czf all.tgz r
