#!/usr/bin/env bash
# CUPTI check: vgpu::cupti::Recorder's durations against cudaEvent durations on the real driver
# (tests/gpu/cupti_check.cu). Nothing is built on the GPU machine:
#
#   tests/gpu/cupti_check.sh build [BUILD_DIR]   here: nvcc builds BUILD_DIR/tests/cupti/cupti_check
#                                                (default build-cupti); carry that file over.
#   tests/gpu/cupti_check.sh run [BUILD_DIR]     on the GPU machine: finds the real driver and
#                                                libcupti, prints where, runs the check.
#
# Output also goes to $OUT/cupti_check.txt when $OUT is set. Exit status is the check's.
set -u
mode=${1:-run}
build=${2:-build-cupti}
bin="$build/tests/cupti/cupti_check"

if [[ $mode == build ]]; then
  [[ -d $build ]] || meson setup "$build"
  exec meson compile -C "$build" -j 1 cupti_check
fi

log=/dev/null
[[ -n ${OUT:-} ]] && log="$OUT/cupti_check.txt"
{
  echo "== cupti_check on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
  if [[ ! -x $bin ]]; then
    echo "missing $bin: build it with '$0 build' and carry $build"
    exit 2
  fi

  # The real driver: the GPU machines keep it in /usr/local/nvidia/lib64.
  for d in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
    if [[ -e $d/libcuda.so.1 ]]; then
      echo "libcuda: $d/libcuda.so.1"
      export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      break
    fi
  done

  # Where libcupti is: the toolkit, else the nvidia wheels beside torch.
  nvidia_dir=$(python3 -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null || true)
  echo "python nvidia package: ${nvidia_dir:-none}"
  found=$( { ls /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* /usr/local/cuda/lib64/libcupti.so* 2>/dev/null
             [[ -n $nvidia_dir ]] && find "$nvidia_dir" -name 'libcupti.so*' 2>/dev/null; } | sort -u)
  echo "libcupti candidates:"; echo "${found:-  none}" | sed 's/^/  /'

  # First as vgpu would run: the recorder's own search. If it finds nothing, name the file.
  echo "-- run 1: Recorder's own search"
  VGPU_LOG_LEVEL=warn "$bin"
  rc=$?
  if [[ $rc == 3 && -n $found ]]; then
    lib=$(echo "$found" | grep -m1 'libcupti.so.13' || echo "$found" | head -1)
    echo "-- run 1b: VGPU_CUPTI_LIBRARY=$lib"
    VGPU_LOG_LEVEL=warn VGPU_CUPTI_LIBRARY="$lib" "$bin"
    rc=$?
  fi
  # Then the copy a PyTorch user has: the one in the nvidia wheel.
  wheel=$(echo "$found" | grep -m1 -- '-packages/.*libcupti.so.13$' || true)
  if [[ -n $wheel ]]; then
    echo "-- run 2: VGPU_CUPTI_LIBRARY=$wheel (the torch wheel's)"
    VGPU_LOG_LEVEL=warn VGPU_CUPTI_LIBRARY="$wheel" "$bin"
    rc2=$?
    [[ $rc == 0 ]] && rc=$rc2
  fi
  echo "cupti_check exit status: $rc"
  exit $rc
} 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
