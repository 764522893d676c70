#!/usr/bin/env bash
# Session 2026-11-26g, call 4: whose code burns the autograd thread's CPU on 8 ranks against 2
# (VGPU_HOST_SAMPLES, new), then record once and replay at 2, 8 and 64 ranks at full batch
# (8 x 1024) with the real 2-GPU step beside it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/s8 $O/s2
show() {  # dir: the threads' libraries and top stacks, two processes
  python3 - "$1" <<'PY'
import json,sys,glob
files=sorted(glob.glob(sys.argv[1]+"/samples_*.jsonl"))
for f in files[:3]:
    for line in open(f):
        d=json.loads(line)
        print("pid",d["pid"],"samples",d["samples"],"dropped",d["dropped"])
        for t in d["threads"][:4]:
            libs=sorted(t["libs"].items(), key=lambda kv:-kv[1])[:9]
            print("  ", t["name"], t["samples"], " ".join(f"{k}={v}" for k,v in libs))
            for c,s in t["stacks"][:6]: print("     ", c, s[:260])
PY
}
VGPU_HOST_SAMPLES=$O/s8/samples_%p.jsonl VGPU_CLOCK_REPORT=$O/s8/clock_%p.jsonl ONLY=eight OUT=$O/s8 timeout 150 tests/gpu/fidelity/run .device > $O/s8/out.txt 2>&1
echo "== 8 ranks t=$((SECONDS-T0))"; grep -E "predicted|FAIL" $O/s8/out.txt | cut -c1-300; show $O/s8
VGPU_HOST_SAMPLES=$O/s2/samples_%p.jsonl STEP_ARGS="--batch 4" ONLY=ddp RUNS=1 OUT=$O/s2 timeout 120 tests/gpu/fidelity/run .device > $O/s2/out.txt 2>&1
echo "== 2 ranks t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/s2/out.txt | cut -c1-300; show $O/s2
timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp --steps 6 --warmup 4 > $O/real_full.log 2>&1
grep -o '"step_ms": [0-9.]*' $O/real_full.log; echo "real full t=$((SECONDS-T0))"
timeout $((575-SECONDS+T0)) tests/gpu/sim_scale --out $O/full --ranks 2 8 64 --timeout 150 -- --batch 8 --seq 1024 > $O/full.txt 2>&1
echo "full t=$((SECONDS-T0))"; grep -E "^record|^sim|^\| [0-9]|ranks:" $O/full.txt | head -20
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
