# Sourced by the scripts that run on the GPU machine (tests/gpu/fidelity/run, the device calls in
# docs/device_calls/): what every vgpu side there needs, from the libraries tests/gpu/stage put in
# ${dev:-.device}. Sets
#   gpu    the first GPU's name (nvidia-smi)
#   model  the virtual GPU model of the same kind: H200-141GB on an H200, else H100-SXM-80GB
#   vrun   the vgpu-run command line for that model, VRUN_ARGS appended (e.g. VRUN_ARGS=--mps)
#   nv     the folder of PyTorch's NCCL library (the NCCL real jobs and nccl-tests use), "/lib"
#          alone when there is none
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) model=H200-141GB ;; *) model=H100-SXM-80GB ;; esac
read -r -a vrun_extra <<<"${VRUN_ARGS:-}"
vrun=(python3 vgpu/tools/vgpu-run --lib-dir "${dev:-.device}/lib" --bin-dir "${dev:-.device}/bin" --model "$model"
      --no-summary "${vrun_extra[@]}")
nv=$(python3 -c "import nvidia.nccl as m; print(m.__path__[0])" 2>/dev/null)/lib
