#!/usr/bin/env python3
"""Sums the VGPU_SIM_MEMORY_REPORT lines of a job's ranks (issue 23: host memory per rank): for
each figure the median and the largest over the ranks, in MiB, and what is left of RssAnon once
the driver's parts are taken out (the program's own: Python, PyTorch, its CPU tensors).

    VGPU_SIM_MEMORY_REPORT=/tmp/mem.jsonl python3 tests/gpu/sim_torch_scale.py 64
    python3 tests/programs/memory_report_summary.py /tmp/mem.jsonl
"""
import json
import statistics
import sys

PATHS = ["htod", "dtod", "peer", "memset", "nccl"]


def row(name, values, what=""):
    values = [v for v in values if v is not None]
    if not values:
        return
    print(f"  {name:<40} {statistics.median(values):>9.1f} {max(values):>9.1f}  {what}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines:
        print(f"{sys.argv[1]}: no report line")
        return 1
    get = lambda key: [r.get(key) for r in lines]
    print(f"{len(lines)} processes; MiB per process: {'median':>9} {'largest':>9}")
    row("RssAnon", get("rss_anon_mib"), "the process's own memory at exit")
    row("VmHWM", get("vm_hwm_mib"), "peak resident, file pages included")
    row("RssShmem", get("rss_shmem_mib"))
    row("malloc in use", get("malloc_in_use_mib"), "the program's and the driver's heap")
    row("module tables", get("module_tables_mib"), "the driver's parsed modules")
    row("device memory allocated", get("device_memory_mib"))
    row("  resident by mincore", get("device_memory_resident_mib"), "pages only read count too")
    row("  private pages written", get("device_memory_private_mib"), "pagemap: RssAnon")
    row("  memfd pages (VMM, IPC)", get("device_memory_memfd_mib"), "pagemap: RssShmem")
    row("  zero page (only read)", get("device_memory_zero_page_mib"), "cost nothing")
    row("  swapped out", get("device_memory_swapped_mib"))
    for key, what in (("device_written_mib", "stored by"), ("device_released_mib", "released instead by")):
        for p in PATHS:
            row(f"{what} {p}", [r.get(key, {}).get(p) for r in lines])
    row("timed only (VGPU_SIM_COPY_DATA_BYTES)", get("device_timed_only_mib"))
    largest = sorted(((h[1], h[0], h[2], i) for i, r in enumerate(lines) for h in r.get("device_largest_own", [])),
                     reverse=True)[:8]
    if largest:
        print("  largest buffers of their own (MiB own of MiB allocated, kind, process #):")
        for own, size, kind, i in largest:
            print(f"    {own:9.1f} of {size:9.1f}  {kind:<6}  #{i}")
    rest = [r["rss_anon_mib"] - r["malloc_in_use_mib"] - max(r.get("device_memory_private_mib", 0), 0)
            - r["module_tables_mib"] for r in lines if "rss_anon_mib" in r]
    row("RssAnon less heap, device, modules", rest, "the program's other mappings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
