#!/usr/bin/env bash
# Twenty-sixth session, call 3, one H200 (issue 18's one-GPU target, within 2%): GPT-2 small on one
# GPU, eager and torch.compile, real against one virtual GPU, alternated, two pairs each
# (tests/gpu/fidelity/run ONLY=single RUNS_SINGLE=2); each step's host probe kept, so that steps
# of one host state can be compared (call 2: the host's two speeds move a step by up to 10%).
export PYTHONUNBUFFERED=1
T0=$SECONDS; O=$OUT/r; mkdir -p $O
nvidia-smi -L; uptime; nproc
ONLY="single" RUNS_SINGLE=2 OUT=$O/f timeout 540 tests/gpu/fidelity/run > $O/fidelity.txt 2>&1
grep -E "^(real|vgpu) single|FAIL|error" $O/fidelity.txt | cut -c1-160; echo "== t=$((SECONDS-T0))"
cd $OUT && tar czf all.tgz r && rm -rf r
