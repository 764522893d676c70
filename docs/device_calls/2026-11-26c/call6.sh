#!/usr/bin/env bash
# Session 2026-11-26c, call 6 (the last seconds of the budget): PyTorch DDP on 64 virtual GPUs of
# the sim backend with VGPU_SIM_COPY_DATA_BYTES=4194304 (large copies into device-only memory
# timed, not performed), host memory per rank from VGPU_SIM_MEMORY_REPORT.
O=$OUT
SCALE_LOG=$O/s64.log VGPU_SIM_COPY_DATA_BYTES=4194304 VGPU_SIM_MEMORY_REPORT=$O/mem.jsonl timeout 140 python3 tests/gpu/sim_torch_scale.py 64 > $O/summary.txt 2>&1
cut -c1-400 $O/summary.txt | tail -3
python3 -c "
import json,statistics,sys
r=[json.loads(l) for l in open('$O/mem.jsonl')]
k=['rss_anon_mib','device_memory_resident_mib','malloc_in_use_mib','module_tables_mib']
print(len(r),'processes;', '; '.join(f'{x} median {statistics.median(d[x] for d in r):.1f} max {max(d[x] for d in r):.1f}' for x in k))"
