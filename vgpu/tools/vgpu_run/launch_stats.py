"""How many kernel launches the passthrough measured and how many took a known duration, for
the summary (issue 21: a launch is measured on the GPU until its signature settles).

Passthrough only, unless the caller set VGPU_LAUNCH_STATS: each process of the job keeps its
counts in a file of its own, VGPU_LAUNCH_STATS=<private dir>/launch-stats-<job>/%p (the driver
replaces %p by its process id; vgpu/passthrough/launch_policy.h), one line
"signatures=N launches=N settled=N from_database=N measured=N"; at the end vgpu-run adds up the
files into one line of the summary and removes the folder."""
import os
import shutil

KEYS = ("signatures", "launches", "settled", "from_database", "measured")


def folder(private_dir, job):
    return os.path.join(private_dir, f"launch-stats-{job}")


def job_vars(backend, private_dir, job, base):
    if backend != "passthrough" or base.get("VGPU_LAUNCH_STATS"):
        return {}
    return {"VGPU_LAUNCH_STATS": os.path.join(folder(private_dir, job), "%p")}


def prepare(setting, private_dir):
    """Creates the job's folder when vgpu-run set the variable; its path, or None."""
    own = folder(private_dir, setting["VGPU_JOB_ID"])
    if setting.get("VGPU_LAUNCH_STATS") != os.path.join(own, "%p"):
        return None
    shutil.rmtree(own, ignore_errors=True)  # an earlier run with the same job id
    os.makedirs(own, mode=0o700, exist_ok=True)
    return own


def total(path):
    """The counts of every process's file in `path`, added up (a file not yet complete counts
    as nothing)."""
    sums = dict.fromkeys(KEYS, 0)
    for name in sorted(os.listdir(path)):
        try:
            with open(os.path.join(path, name)) as f:
                fields = dict(kv.split("=", 1) for kv in f.readline().split())
            counts = {k: int(fields[k]) for k in KEYS}
        except (OSError, ValueError, KeyError):
            continue
        for k in KEYS:
            sums[k] += counts[k]
    return sums


def note(counts):
    """The summary's line, or None when no launch was counted."""
    n = counts["launches"]
    if n == 0:
        return None
    measured = counts["measured"]
    return (f"kernel launches with a signature: {n}, measured on the GPU {measured} "
            f"({100.0 * measured / n:.1f}%), settled {counts['settled']}, from the kernel-time "
            f"database {counts['from_database']}; {counts['signatures']} distinct durations")


def finish(path):
    """The summary's line for the job's folder `path` (then removed), or None."""
    if path is None:
        return None
    line = note(total(path))
    shutil.rmtree(path, ignore_errors=True)
    return line
