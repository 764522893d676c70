"""--record DB and --kernel-db DB: the kernel-time database of a job.

--record DB     (passthrough) VGPU_KERNEL_DB=DB: the driver measures every kernel on the GPU
                and records each launch signature's duration in DB (SQLite; a folder holds
                one file per GPU model).
--kernel-db DB  (sim) VGPU_KERNEL_DB=DB: kernels take the durations recorded in DB, and the
                fallback model's for signatures DB lacks. VGPU_KERNEL_DB_MISSES=FILE makes each
                process of the job append those signatures to FILE at exit
                (vgpu/front/launch/kernel_db_misses.h); vgpu-run lists them at the end with the time
                they were given, and counts them by why DB lacked them, and counts the launches
                each level of DB answered (exact row, settled group, work key, the same
                kernel and shape at its recorded median; the fallback model for the rest: the file's "#answered" lines, one per process).
"""
import os

from .errors import UsageError

SHOWN = 20  # missing signatures listed at the end (the file holds all)
# The file's cause column (vgpu/front/launch/kernel_db_misses.h), as the summary names it.
CAUSES = {"new-kernel": "kernel/shape never recorded",
          "keyed-words": "with keyed words (sizes) never recorded",
          "ranges": "outside the ranges recorded"}
# The levels of the "#answered" lines (KernelDbLevel, vgpu/front/launch/kernel_time_db.h), in order.
LEVELS = ("exact", "group", "work-key", "family", "fallback")
LEVEL_NAMES = {"exact": "exact row", "group": "settled group", "work-key": "work key",
               "family": "same kernel and shape", "fallback": "fallback model"}


def answered_line(counts):
    """The launches each level answered, summed over the job's processes; None without counts.
    NCCL kernels ("collective": the collective model times them) are named apart, after."""
    total = sum(v for k, v in counts.items() if k in LEVELS)
    collective = counts.get("collective", 0)
    if not total and not collective:
        return None
    found = total - counts.get("fallback", 0)
    share = f"{100.0 * found / total:.1f}%" if total else "-"
    return (f"  launches answered: " + ", ".join(f"{LEVEL_NAMES[k]} {counts.get(k, 0)}" for k in LEVELS)
            + f" ({found} of {total} from the database, {share})"
            + (f"; NCCL kernels {collective}, timed by the collective model" if collective else ""))


def check(options, backend):
    if options.record and options.kernel_db:
        raise UsageError("--record and --kernel-db exclude each other (record on a GPU, then "
                         "simulate with the database)")
    if options.record and backend != "passthrough":
        raise UsageError("--record needs the passthrough backend (a GPU): the sim backend "
                         "measures no kernel")


def record_notes(options, backend, virtual_gpus):
    """A line when --record may measure kernels beside other ranks' work: several virtual GPUs
    with no --mps. Virtual GPUs that share a physical GPU are contexts that time-slice it, and the
    passthrough keeps a measurement apart from other measurements, not from the other ranks'
    kernels whose durations are known: a 2-GPU recording of GPT-2's DDP step measured the lm_head
    input-gradient GEMM at 9.29 ms, the 8-process passthrough with --mps at 4.26 ms (2026-11-29,
    docs/results.md)."""
    if not options.record or backend != "passthrough" or options.mps or virtual_gpus < 2:
        return []
    return [f"--record on {virtual_gpus} virtual GPUs without --mps: where they share a physical GPU, "
            "a kernel measured there can absorb the other ranks' kernels (time-slicing: a 2-GPU "
            "recording read one GEMM at 2.2x its --mps time); record with --mps, or on one virtual "
            "GPU a physical GPU"]


def job_vars(options, folder, job):
    if options.record:
        return {"VGPU_KERNEL_DB": os.path.abspath(options.record)}
    if options.kernel_db:
        return {"VGPU_KERNEL_DB": os.path.abspath(options.kernel_db),
                "VGPU_KERNEL_DB_MISSES": os.path.join(folder, f"kernel-db-misses-{job}.tsv")}
    return {}


def report(path, db):
    """Lines for the end of the run: the signatures DB lacked, largest total time first."""
    rows = {}
    counts = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if parts[0] == "#answered":
                    for field in parts[1:]:
                        k, _, v = field.partition("=")
                        if (k in LEVELS or k == "collective") and v.isdigit():
                            counts[k] = counts.get(k, 0) + int(v)
                    continue
                if len(parts) == 6:  # written before causes were
                    parts.append("-")
                if len(parts) != 7:
                    continue
                launches, seconds, name, grid, block, sig, cause = parts
                cause, _, detail = cause.partition(" ")
                key = sig if sig != "-" else name
                old = rows.get(key)
                n = int(launches) + (old[0] if old else 0)
                rows[key] = (n, float(seconds), name, grid, block, cause, detail)
    except OSError:
        return [f"kernel database {db}: every launch signature was found"]
    answered = answered_line(counts)
    if not rows:
        return [f"kernel database {db}: every launch signature was found"] + ([answered] if answered else [])
    total = sum(r[0] for r in rows.values())
    lines = [f"kernel database {db}: {len(rows)} launch signature(s) ({total} launches) were not in "
             f"it and got the fallback model's time (all in {path}):"]
    if answered:
        lines.append(answered)
    causes = {}
    for r in rows.values():
        c = causes.setdefault(r[5], [0, 0])
        c[0] += 1
        c[1] += r[0]
    if set(causes) - {"-"}:
        lines.append("  by cause: " + "; ".join(
            f"{c} {causes[c][0]} ({causes[c][1]} launches: {CAUSES.get(c, 'not given')})"
            for c in sorted(causes)))
    for n, seconds, name, grid, block, cause, detail in sorted(rows.values(),
                                                             key=lambda r: -r[0] * r[1])[:SHOWN]:
        short = name if len(name) <= 60 else name[:57] + "..."
        why = f"  [{cause}{' ' + detail if detail else ''}]" if cause != "-" else ""
        lines.append(f"  {n:>7} x {seconds * 1e6:12.3f} us  {short}  grid {grid} block {block}{why}")
    if len(rows) > SHOWN:
        lines.append(f"  ... and {len(rows) - SHOWN} more")
    return lines
