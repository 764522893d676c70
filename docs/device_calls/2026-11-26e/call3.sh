#!/usr/bin/env bash
# Session 2026-11-26e, call 3: a ring passes on when every rank it heard from began (MessageDesc.ready_hint), on top of
# call 2 (the least sample of the same work): the 8-GPU row (timeline kept), then DDP and FSDP2 on 2 ranks,
# real beside each, one run each. No NCCL gate.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/e $O/f
cat /proc/loadavg
TIMELINE=1 ONLY=eight OUT=$O/e timeout 250 tests/gpu/fidelity/run .device > $O/e/out.txt 2>&1
echo "eight t=$((SECONDS-T0))"
ONLY="ddp fsdp2" RUNS=1 OUT=$O/f timeout $((560-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/f/out.txt 2>&1
echo "ddp+fsdp2 t=$((SECONDS-T0))"
for d in e f; do echo "== $d"; grep -E "^vgpu|^real|predicted|FAIL|%" $O/$d/out.txt | cut -c1-420; done
cd $OUT && tar czf all.tgz r && rm -rf r
