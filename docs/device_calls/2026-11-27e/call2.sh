#!/usr/bin/env bash
# Fourteenth session, call 2 (run on the warm host of call 1). Planned (moved from 2026-11-27c/call9.sh: run by neither the twelfth nor the thirteenth session, no device
# time), for the next session's second call. Issue 18's open questions:
# (a) why nccl-tests' 64 KiB-1 MiB loops take 12-18 us an iteration on some hosts lent and 20-27 on
#     others: on one host, real, -c 0 and -c 1 (data checks), -n 20 and -n 200, all-gather and
#     all-reduce; then vgpu with NCCL's host cost model and with it off, the same runs;
# (b) the collective model's slopes pooled over hosts: every collective at 4-64 MiB, -n 5 and -n 100,
#     real only (k and g per collective), to refit Simple to slopes of several machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/small $O/slope
nvidia-smi -L; lscpu | grep -E "Model name|MHz" | head -3
printf '[collectives.host]\nenabled = false\n' > $O/measured.toml
source tests/gpu/vgpu_env.sh  # gpu, model, vrun, nv
export LD_LIBRARY_PATH=$nv:${LD_LIBRARY_PATH:-}
for op in all_gather all_reduce; do
  for c in 0 1; do
    for n in 20 200; do
      a=(.gpu/nccl-tests/${op}_perf -g 2 -b 64K -e 1M -f 4 -n $n -w 5 -c $c)
      timeout 30 "${a[@]}" > $O/small/${op}_c${c}_n${n}_real.log 2>&1
      VGPU_PHYSICAL_DEVICES=0 timeout 40 "${vrun[@]}" --gpus 2 -- "${a[@]}" > $O/small/${op}_c${c}_n${n}_model.log 2>&1
      VGPU_PHYSICAL_DEVICES=0 timeout 40 "${vrun[@]}" --gpus 2 --config $O/measured.toml -- "${a[@]}" > $O/small/${op}_c${c}_n${n}_measured.log 2>&1
    done
  done
done
echo "small t=$((SECONDS-T0))"
for op in all_reduce all_gather reduce_scatter broadcast sendrecv alltoall; do
  for n in 5 100; do
    timeout 30 .gpu/nccl-tests/${op}_perf -g 2 -b 4M -e 64M -f 4 -n $n -w 5 -c 0 > $O/slope/${op}_n${n}_real.log 2>&1
  done
done
echo "slope t=$((SECONDS-T0))"
grep -H -E "^ +[0-9]+ " $O/small/*.log | awk '{print $1, $2, $6, $10}' | head -80
cd $OUT && tar czf all.tgz r
