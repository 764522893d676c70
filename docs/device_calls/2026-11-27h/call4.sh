#!/usr/bin/env bash
# Seventeenth session, call 4 (issue 18): what a small-size nccl-tests figure is made of, real and
# under vgpu on one host: each collective's timed loop at -n 20 (the fidelity table's) and -n 200,
# 64 KiB-1 MiB, -w 5, alternating real / vgpu and the two lengths, twice, so each side's time an
# iteration splits into a steady part (the slope) and a fixed part of the timed loop (F / n).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
source tests/gpu/vgpu_env.sh
for rep in 1 2; do
  for op in all_gather all_reduce broadcast; do
    for n in 20 200; do
      LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 60 .gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 1M -f 4 -n $n -w 5 > $O/${op}_real_n${n}_$rep.log 2>&1
      VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-} timeout 120 "${vrun[@]}" --gpus 2 -- \
        .gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 1M -f 4 -n $n -w 5 > $O/${op}_vgpu_n${n}_$rep.log 2>&1
    done
  done
  echo "rep $rep t=$((SECONDS-T0))"
done
python3 - $O <<'PY'
import sys
sys.path.insert(0, "tests/gpu/fidelity")
import nccl_tests_table as t
d = sys.argv[1]
print("op side rep size: t20 t200 (us, out-of-place) -> slope, fixed F (us a timed loop)")
for op in ("all_gather", "all_reduce", "broadcast"):
    for side in ("real", "vgpu"):
        for rep in (1, 2):
            a = t.times(f"{d}/{op}_{side}_n20_{rep}.log"); b = t.times(f"{d}/{op}_{side}_n200_{rep}.log")
            for size in sorted(a):
                if size in b and a[size][0] and b[size][0]:
                    t20, t200 = a[size][0], b[size][0]
                    F = (t20 - t200) * 20 * 200 / 180
                    print(f"{op:12s} {side} {rep} {size:8d}: {t20:6.2f} {t200:6.2f} -> {t200 - F / 200:6.2f} {F:7.1f}")
PY
echo "t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r
