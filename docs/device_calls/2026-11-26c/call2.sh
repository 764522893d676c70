#!/usr/bin/env bash
# Session 2026-11-26c, call 2: nccl-tests real vs vgpu with the collective model fitted to the
# H200 curves of call 1 (given as a cluster file, VGPU_CONFIG); vgpu timelines (with issue times)
# of GPU-bound nccl-tests sizes; FSDP2 and DDP steps with and without the driver-time table.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT; mkdir -p $O/fid $O/tl $O/steps $O/steps_table
export VGPU_CONFIG=$PWD/.device/cfg/h200fit.toml
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])")/lib
vrun=(python3 vgpu/tools/vgpu-run --lib-dir .device/lib --bin-dir .device/bin --model H200-141GB --no-summary)
for op in all_gather all_reduce; do
  VGPU_PHYSICAL_DEVICES=0 LD_LIBRARY_PATH=$nv taskset -c 0-15 timeout 60 "${vrun[@]}" --gpus 2 --timeline $O/tl/$op.json -- \
    .gpu/nccl-tests/${op}_perf -g 2 -b 4M -e 16M -f 4 -n 20 -w 5 > $O/tl/$op.log 2>&1
  grep -E "^ +[0-9]" $O/tl/$op.log
done
echo "t=$((SECONDS-T0))"
ONLY=nccl RUNS=1 NCCL_TESTS=.gpu/nccl-tests OUT=$O/fid taskset -c 0-15 timeout 260 tests/gpu/fidelity/run .device > $O/fid_out.txt 2>&1
grep -E "MISSED|within|FAIL" $O/fid_out.txt | head -40
echo "t=$((SECONDS-T0))"
ONLY="fsdp2 ddp" RUNS=1 OUT=$O/steps taskset -c 0-15 timeout $((440-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/steps_out.txt 2>&1
grep -E "^(real|vgpu|FAIL)" $O/steps_out.txt | cut -c1-300
echo "t=$((SECONDS-T0))"
VGPU_DRIVER_TIME=table ONLY="fsdp2" RUNS=1 OUT=$O/steps_table taskset -c 0-15 timeout $((560-(SECONDS-T0))) tests/gpu/fidelity/run .device > $O/steps_table_out.txt 2>&1
grep -E "^(real|vgpu|FAIL)" $O/steps_table_out.txt | cut -c1-300
echo "t=$((SECONDS-T0))"
cd $O && tar czf all.tgz fid tl steps steps_table *.txt && rm -rf fid tl steps steps_table
