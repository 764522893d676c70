#!/usr/bin/env bash
# Sixteenth session, call 7 (issue 23): call 5's 2-rank replay read 0.932 of the passthrough (44.26
# against 47.47 ms; 1.003-1.008 in earlier sessions). Once more on one host: the real 2-GPU DDP step,
# then tests/gpu/sim_scale --ranks 2 (record on the passthrough, replay on the sim), a second replay
# from the same database, the real step again.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L
real() { timeout 60 torchrun --standalone --nproc_per_node 2 tests/gpu/fidelity/train_step.py ddp --steps 12 --warmup 4 > $O/ddp_real_$1.log 2>&1; echo "real $1: $(grep RESULT $O/ddp_real_$1.log | cut -c1-200) t=$((SECONDS-T0))"; }
real 1
timeout 150 tests/gpu/sim_scale --ranks 2 --out $O/s --timeout 100 -- --batch 8 --seq 1024 > $O/sim_a.txt 2>&1
grep -E "^record|^sim 2|^\| 2" $O/sim_a.txt | cut -c1-300; echo "t=$((SECONDS-T0))"
timeout 60 tests/gpu/sim_scale --no-record --db $O/s/kernels.db --ranks 2 --out $O/s2 --timeout 50 -- --batch 8 --seq 1024 > $O/sim_b.txt 2>&1
grep -E "^sim 2" $O/sim_b.txt | cut -c1-300; echo "t=$((SECONDS-T0))"
real 2
find $O -name "*.db*" -delete; cd $OUT && tar czf all.tgz r
