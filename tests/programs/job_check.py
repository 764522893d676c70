"""What the scripts that run a test program as a job (run_nccl_program.py, run_ddp_ranks.py, run_nccl_links.py,
run_nccl_links_cross.py, run_p2p_pipeline.py) share:
running the job with a timeout that reads as a hang, counting the checks that failed, and reading
the NCCL collectives of the job's timelines, and a scratch folder that goes when the script ends."""
import atexit
import json
import os
import shutil
import subprocess
import tempfile


def scratch_dir(prefix):
    """A new folder under the temporary directory, removed with what it holds when the script
    exits (VGPU_KEEP_SCRATCH=1 keeps it, to read a failed job's files)."""
    path = tempfile.mkdtemp(prefix=prefix)
    if os.environ.get("VGPU_KEEP_SCRATCH") != "1":
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def run_job(cmd, env, timeout_s):
    """Runs `cmd`; (stdout + stderr, exit status), or None after printing why when it did not end
    within `timeout_s` (a hang)."""
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        print(out[-4000:])
        print(f"FAIL the job did not end within {timeout_s} s (hang)")
        return None
    return r.stdout + r.stderr, r.returncode


class Checks:
    """check(ok, what) prints one "ok" or "FAIL" line; `failures` counts the FAILs."""

    def __init__(self):
        self.failures = 0

    def __call__(self, ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        self.failures += not ok

    def verdict(self, out):
        """The script's exit status: 0, or 1 after printing the end of the job's output (NCCL's
        INFO lines left out) to show what failed."""
        if not self.failures:
            return 0
        print("\n".join(line for line in out.splitlines() if "NCCL INFO" not in line)[-4000:])
        return 1


def run_checked(cmd, env, timeout_s):
    """run_job, then the first check (the job's exit status): (output, checks), or None after a
    hang."""
    ran = run_job(cmd, env, timeout_s)
    if ran is None:
        return None
    out, status = ran
    check = Checks()
    check(status == 0, f"exit status {status}")
    return out, check


def nccl_sequences(timelines):
    """{(pid, tid): [{"arrival": e, "kernel": e, "end": e}, ...]}: each timeline row's NCCL
    all-reduces in order (the sim backend writes an arrival, the kernel and the collective's end),
    read from the given Chrome-trace files together."""
    events = []
    for path in timelines:
        with open(path) as f:
            data = json.load(f)
        events += data["traceEvents"] if isinstance(data, dict) else data
    rows = {}
    for e in events:
        name = e.get("name", "")
        if e.get("ph") == "X" and (name in ("nccl arrival", "nccl collective end") or "[AllReduce " in name):
            rows.setdefault((e["pid"], e["tid"]), []).append(e)
    seqs = {}
    for key, evs in rows.items():
        evs.sort(key=lambda e: (e["ts"], e["name"] != "nccl arrival"))
        seq = []
        for e in evs:
            if e["name"] == "nccl arrival":
                seq.append({"arrival": e})
            elif seq and e["name"] == "nccl collective end":
                seq[-1]["end"] = e
            elif seq:
                seq[-1]["kernel"] = e
        seqs[key] = seq
    return seqs, events
