#!/usr/bin/env python3
"""A GPT-2 small DDP job of N ranks (processes) on the sim backend, as a user would start it:
vgpu-run --backend sim --nodes N/8 --gpus 8 -- torchrun --nproc_per_node N train_step.py ddp.
While it runs, every rank's memory is sampled from /proc (RssAnon: its own memory; RssFile: the
mapped libraries, page cache shared by every rank), and at the end one line gives the virtual
step, the wall time, and the peak memory per rank (issue 23: 64 ranks under 2 GB each).

    python3 tests/gpu/sim_torch_scale.py N [LIBDIR] [-- train_step.py options]
"""
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def ranks_memory():
    """kB of RssAnon and RssFile of every train_step.py process now."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            if b"train_step.py" not in cmd or b"torchrun" in cmd:
                continue
            fields = {}
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    k, _, v = line.partition(":")
                    if k in ("RssAnon", "RssFile", "VmHWM"):
                        fields[k] = int(v.split()[0])
            out[pid] = fields
        except OSError:
            pass
    return out


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        i = args.index("--")
        args, extra = args[:i], args[i + 1:]
    n = int(args[0])
    lib = args[1] if len(args) > 1 else os.path.join(ROOT, ".device", "lib")
    bindir = os.path.join(os.path.dirname(lib), "bin")
    nodes = max(1, n // 8)
    step_args = extra or ["--batch", "1", "--seq", "512", "--steps", "3", "--warmup", "1"]
    cmd = [sys.executable, os.path.join(ROOT, "vgpu/tools/vgpu-run"), "--lib-dir", lib, "--bin-dir", bindir,
           "--backend", "sim", "--nodes", str(nodes), "--gpus", str(min(n, 8)), "--no-summary", "--",
           "torchrun", "--standalone", "--nproc_per_node", str(n),
           os.path.join(ROOT, "tests/gpu/fidelity/train_step.py"), "ddp"] + step_args
    peak = {"anon": 0, "file": 0, "hwm": 0, "ranks_seen": 0}
    done = threading.Event()

    def sample():
        while not done.is_set():
            m = ranks_memory()
            if m:
                peak["ranks_seen"] = max(peak["ranks_seen"], len(m))
                peak["anon"] = max(peak["anon"], max(v.get("RssAnon", 0) for v in m.values()))
                peak["file"] = max(peak["file"], max(v.get("RssFile", 0) for v in m.values()))
                peak["hwm"] = max(peak["hwm"], max(v.get("VmHWM", 0) for v in m.values()))
                peak["total_anon"] = max(peak.get("total_anon", 0), sum(v.get("RssAnon", 0) for v in m.values()))
            done.wait(0.5)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(
        os.environ, PYTHONUNBUFFERED="1", VGPU_LOG_LEVEL=os.environ.get("VGPU_LOG_LEVEL", "warn")))
    wall = time.time() - t0
    done.set()
    t.join()
    result = None
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[7:])
    log = os.environ.get("SCALE_LOG")
    if log:
        with open(log, "w") as f:
            f.write(p.stdout)
    if result is None:
        print(f"FAIL scale {n}: exit {p.returncode} after {wall:.1f} s")
        for line in p.stdout.splitlines()[-12:]:
            print("   " + line[:300])
        return 1
    print(f"scale {n} ranks ({nodes} x {min(n, 8)}): virtual step {result['step_ms']} ms (steps {result['steps_ms']}), "
          f"wall per step {result.get('wall_ms')} ms, job {wall:.1f} s; per rank peak RssAnon "
          f"{peak['anon'] / 1024:.0f} MiB, RssFile {peak['file'] / 1024:.0f} MiB, VmHWM {peak['hwm'] / 1024:.0f} MiB; "
          f"all ranks' RssAnon at once {peak.get('total_anon', 0) / 1048576:.1f} GiB ({peak['ranks_seen']} ranks seen)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
