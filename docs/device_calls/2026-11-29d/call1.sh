#!/usr/bin/env bash
# Twenty-eighth session, call 1, one H200 (issue 23 at 8 ranks): with the collective-overlap rule
# off the sim's 8 ranks read 5.6% below the passthrough's 8 processes, all of it in the backward
# (2026-11-29c call 6). Where: both backends' timelines of the same job (3 + 3 steps, rule off),
# compared per all-reduce (each rank's NCCL kernel start = its arrival, the kernel's end) and per
# rank's compute between them (tests/gpu/fidelity/arrivals.py, run on the fetched traces).
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime
source tests/gpu/vgpu_env.sh
S=tests/gpu/fidelity/train_step.py
export VGPU_COMPUTE_BESIDE_COLLECTIVE=1 VGPU_COMPUTE_BESIDE_WAITING_COLLECTIVE=1
VGPU_PHYSICAL_DEVICES=0 timeout 120 "${vrun[@]}" --gpus 8 --mps --timeline $O/pt8.trace.json -- torchrun --standalone --nproc_per_node 8 $S ddp --batch 8 --seq 1024 --steps 3 --warmup 3 > $O/pt8.log 2>&1
grep -m1 '^RESULT' $O/pt8.log | cut -c1-200; echo "== pt8 t=$((SECONDS-T0))"
timeout 230 python3 tests/gpu/sim_scale --ranks 8 --out $O/s --timeout 110 --replay-steps 3 3 -- --batch 8 --seq 1024 > $O/s.txt 2>&1
tail -8 $O/s.txt | cut -c1-300; echo "== sim_scale (record, replay) t=$((SECONDS-T0))"
VGPU_TIMELINE=$O/sim8.trace.json timeout 110 python3 tests/gpu/sim_scale --ranks 8 --no-record --db $O/s/kernels.db --out $O/t --timeout 100 --replay-steps 3 3 -- --batch 8 --seq 1024 > $O/t.txt 2>&1
tail -6 $O/t.txt | cut -c1-300; echo "== sim 8 with its timeline t=$((SECONDS-T0))"
ls -la $O | head -30
rm -f $O/s/kernels.db*
gzip -6 $O/*.json 2>/dev/null; rm -rf $O/*.json.parts.* 2>/dev/null; cd $OUT && tar czf all.tgz r && rm -rf r
