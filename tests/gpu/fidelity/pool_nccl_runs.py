"""Pools real nccl-tests runs of several device calls into one data file for fit_collectives.py
(--pooled): each run's out-of-place time at every size from 4 MiB (NCCL's Simple protocol), one
row per run and size, so that the fit sees how the same collective varies between the machines
a kind lends (reduce-scatter at 16 MiB: 50.1-53.1 us over the twelfth session's calls).

    python3 tests/gpu/fidelity/pool_nccl_runs.py "header line" ... -- LABEL=LOG ... > tests/data/X.txt

LABEL names the run (its call and loop); the collective is read from the log. Runs whose first
iterations weigh on the average (nccl-tests -n 5) are better left out: they time the host.
"""
import sys

from nccl_tests_table import parse, times

SIMPLE_FROM = 4 << 20
OPS = {"all_gather": "all_gather", "all_reduce": "all_reduce", "alltoall": "alltoall", "broadcast": "broadcast",
       "reduce_scatter": "reduce_scatter", "sendrecv": "sendrecv"}


def main(argv):
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    cut = argv.index("--")
    for comment in argv[1:cut]:
        print(f"# {comment}")
    print("# op size_bytes time_us run")
    for arg in argv[cut + 1:]:
        label, _, path = arg.partition("=")
        rows = parse(path)
        op = OPS.get(rows[0][0]) if rows else None
        if op is None:
            print(f"pool_nccl_runs.py: {path}: no nccl-tests rows of a known collective", file=sys.stderr)
            return 1
        for size, (t, _) in sorted(times(path).items()):
            if size >= SIMPLE_FROM:
                print(f"{op} {size} {t} {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
