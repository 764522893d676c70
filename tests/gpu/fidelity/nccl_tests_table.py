"""Reads the output of NVIDIA's nccl-tests (*_perf) into rows, NCCL's own INFO lines (which it
may print in the middle of a result row) removed first.

    python3 nccl_tests_table.py LOG [LOG...]      # prints: op size_bytes time_us busbw_GBps algo proto channels

`times(path)` gives each size's out-of-place and in-place time (nccl_curves.py, fit_nccl_host.py).

The time and bus bandwidth are the out-of-place columns. Lines NCCL printed with
NCCL_DEBUG_SUBSYS=TUNING ("AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}")
give the algorithm, protocol and channel count NCCL chose for each size (rank 0's choice).
"""
import re
import sys

INFO = re.compile(r"[A-Za-z][\w.-]*:\d+:\d+ \[\d+\] NCCL INFO [^\n]*\n?")
TUNING = re.compile(r"NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}")
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)"
                 r"(?:\s+([\d.]+))?")  # the in-place time follows the out-of-place columns


def parse(path):
    text = open(path, errors="replace").read()
    op = re.search(r"Collective test starting: (\w+)_perf", text)
    op = op.group(1) if op else path
    tuning = {}
    for m in TUNING.finditer(text):
        tuning.setdefault(int(m.group(2)), (m.group(3), m.group(4), int(m.group(6)) - int(m.group(5)) + 1))
    rows = []
    for line in INFO.sub("", text).splitlines():
        m = ROW.match(line)
        if m:
            size = int(m.group(1))
            rows.append((op, size, float(m.group(6)), float(m.group(8)), tuning))
    return rows


def times(path):
    """size -> (out-of-place time, in-place time) in us of one log (in-place None when absent)."""
    text = open(path, errors="replace").read()
    out = {}
    for line in INFO.sub("", text).splitlines():
        m = ROW.match(line)
        if m:
            out[int(m.group(1))] = (float(m.group(6)), float(m.group(10)) if m.group(10) else None)
    return out


def main():
    for path in sys.argv[1:]:
        for op, size, t, bus, tuning in parse(path):
            # NCCL logs the bytes of its own count (per rank for all-gather / reduce-scatter).
            algo = next((v for k, v in tuning.items() if k in (size, size // 2)), ("?", "?", 0))
            print(op, size, t, bus, *algo)


if __name__ == "__main__":
    main()
