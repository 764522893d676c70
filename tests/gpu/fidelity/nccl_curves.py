"""Writes the real nccl-tests curves of one device call as a data file for fit_collectives.py
(tests/data/nccl_tests_*.txt): for each collective, the out-of-place time of two default-mode
runs and of one CUDA-graph run (-G 20, the GPU's time alone) at every size.

    python3 tests/gpu/fidelity/nccl_curves.py DIR "header line" ... > tests/data/nccl_tests_X.txt

DIR holds <op>_a.log, <op>_b.log (default mode) and <op>_g.log (graph mode), as
docs/device_calls/2026-11-27c/call3.sh writes them; each further argument is a comment line.
"""
import os
import sys

from nccl_tests_table import times as log_times

OPS = ("all_gather", "all_reduce", "alltoall", "broadcast", "reduce_scatter", "sendrecv")


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = argv[1]
    for comment in argv[2:]:
        print(f"# {comment}")
    print("# op size_bytes default_run1_us default_run2_us graph_us (-G 20: GPU time, no host)")
    for op in OPS:
        a, b, g = ({size: t[0] for size, t in log_times(os.path.join(d, f"{op}_{m}.log")).items()} for m in "abg")
        for size in sorted(a):
            if size > 0 and size in b and size in g:
                print(f"{op} {size} {a[size]} {b[size]} {g[size]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
