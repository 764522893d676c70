#!/usr/bin/env bash
# Fourteenth session (2026-11-27), call 1: the thirteenth session's planned 2026-11-27d/call1.sh (removed once this ran)
# (the fidelity table of the tree with the H200's pooled Simple fit and the TSan-era clock fixes:
# nccl-tests 64 KiB-16 MiB, DDP and FSDP2 two runs each, the host's CPU noted) plus, first, what
# issue 21 needs to know of this host: its clock source (a clock read that leaves the vDSO costs a
# system call), whether perf exists, and the call-overhead bench (7 rounds) on GPU 0.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O/d
nvidia-smi -L; lscpu | grep -E "Model name|MHz|^CPU\(s\)|Hypervisor" | tee $O/lscpu.txt
cat /sys/devices/system/clocksource/clocksource0/current_clocksource /sys/devices/system/clocksource/clocksource0/available_clocksource | tee $O/clocksource.txt
which perf; uptime
CUDA_VISIBLE_DEVICES=0 taskset -c 0-7 timeout 90 .device/bench/passthrough_call_overhead /usr/local/nvidia/lib64/libcuda.so.1 $PWD/.device/lib/passthrough/libcuda.so.1 .device/bench/empty_kernel.fatbin 7 > $O/bench.txt 2>&1
echo "== bench t=$((SECONDS-T0))"; tail -12 $O/bench.txt
ONLY="nccl ddp fsdp2" NCCL_MAX=16M RUNS=2 NCCL_TESTS=.gpu/nccl-tests OUT=$O/d timeout 300 tests/gpu/fidelity/run .device > $O/d/out.txt 2>&1
echo "== d t=$((SECONDS-T0))"; grep -E "%|FAIL" $O/d/out.txt | cut -c1-200
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
