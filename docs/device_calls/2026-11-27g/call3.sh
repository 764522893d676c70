#!/usr/bin/env bash
# Sixteenth session, call 3 (issue 23): a PyTorch pipeline-parallel job (train_step.py pp: GPT-2 small
# in N stages, GPipe over 4 micro-batches of 2 x 1024, activations and their gradients by NCCL
# send/recv) real on both GPUs, under vgpu's passthrough on GPU 0 recording its kernels, and replayed
# on the sim backend (no GPU) at 2 and 4 stages; first a small shape as a smoke test.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L
source tests/gpu/vgpu_env.sh
summ() { grep RESULT $1 | python3 -c '
import json,sys; r=json.loads(sys.stdin.read()[7:])
print(r["step_ms"], "steps", min(r["steps_ms"]), max(r["steps_ms"]), "phases", r["forward_ms"], r["backward_ms"], r["optimizer_ms"], "host", [[round(x,1) for x in h[:4]] for h in r["ranks_host_ms"]], "wall", r["wall_ms"], "loss", r["loss"])' 2>&1 | cut -c1-400 || tail -5 $1; }
TS=tests/gpu/fidelity/train_step.py
timeout 60 torchrun --standalone --nproc_per_node 2 $TS pp --layers 4 --seq 256 --steps 4 --warmup 2 > $O/smoke_real.log 2>&1
echo "smoke real: $(summ $O/smoke_real.log)"; grep -E "Error|error" $O/smoke_real.log | head -5
echo "== t=$((SECONDS-T0))"
A="--steps 12 --warmup 3"
for i in 1 2; do
  timeout 60 torchrun --standalone --nproc_per_node 2 $TS pp $A > $O/pp_real_$i.log 2>&1
  echo "pp real $i: $(summ $O/pp_real_$i.log) t=$((SECONDS-T0))"
done
VGPU_PHYSICAL_DEVICES=0 timeout 120 "${vrun[@]}" --backend passthrough --record $O/pp.db --gpus 2 -- torchrun --standalone --nproc_per_node 2 $TS pp $A > $O/pp_vgpu.log 2>&1
echo "pp vgpu (recording): $(summ $O/pp_vgpu.log) t=$((SECONDS-T0))"
for n in 2 4; do
  timeout 120 "${vrun[@]}" --backend sim --kernel-db $O/pp.db --gpus $n -- torchrun --standalone --nproc_per_node $n $TS pp $A > $O/pp_sim_$n.log 2>&1
  echo "pp sim $n: $(summ $O/pp_sim_$n.log) t=$((SECONDS-T0))"; grep -iE "missed|fallback|error" $O/pp_sim_$n.log | head -4 | cut -c1-300
done
timeout 60 torchrun --standalone --nproc_per_node 2 $TS pp $A > $O/pp_real_3.log 2>&1
echo "pp real 3: $(summ $O/pp_real_3.log) t=$((SECONDS-T0))"
rm -f $O/pp.db*; cd $OUT && tar czf all.tgz r
