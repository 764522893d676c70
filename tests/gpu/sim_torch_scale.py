#!/usr/bin/env python3
"""A GPT-2 small DDP job of N ranks (processes) on the sim backend, as a user would start it:
vgpu-run --backend sim --nodes N/8 --gpus 8 -- torchrun --nproc_per_node N train_step.py ddp for
N <= 8; for N > 8 as a real job of N/8 nodes runs, one torchrun agent per virtual node (8 local
ranks each, `--nnodes N/8 --node-rank k`, one rendezvous), agent k's processes seeing node k's
GPUs as devices 0-7 through CUDA_VISIBLE_DEVICES (their UUIDs: PyTorch counts devices through
NVML and compares CUDA_VISIBLE_DEVICES ordinals with NVML's count, which past 32 GPUs is one
node's 8), all in one vgpu-run job (one VGPU_JOB_ID for the whole process tree).
While it runs, every rank's memory is sampled from /proc (RssAnon: its own memory; RssFile: the
mapped libraries, page cache shared by every rank), and at the end one line gives the virtual
step, the wall time, and the peak memory per rank (issue 23: 64 ranks under 2 GB each).

    python3 tests/gpu/sim_torch_scale.py N [LIBDIR] [-- train_step.py options]

run_job() is the same job as a function (tests/gpu/sim_scale runs it at 2, 8 and 64 ranks with a
recorded kernel-time database). SIM_VGPU_RUN=PATH runs that vgpu-run (e.g. the build tree's
build/vgpu/tools/vgpu-run, which knows its libraries) instead of vgpu/tools/vgpu-run --lib-dir
LIBDIR; the tests of sim_scale use it.
"""
import ctypes
import json
import os
import signal
import socket
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


def gpu_uuids():
    """The UUIDs of the job's GPUs, by global index, from vgpu's NVML (a process with no CUDA
    device and no VGPU_NODE_INDEX sees the whole cluster)."""
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    if nvml.nvmlInit_v2() != 0:
        raise RuntimeError("nvmlInit failed")
    count = ctypes.c_uint()
    nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
    out = []
    for i in range(count.value):
        h, buf = ctypes.c_void_p(), ctypes.create_string_buffer(96)
        if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) != 0 or nvml.nvmlDeviceGetUUID(h, buf, 96) != 0:
            raise RuntimeError(f"NVML device {i}")
        out.append(buf.value.decode())
    nvml.nvmlShutdown()
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agents(n, step_args):
    """Inside the vgpu-run job: one torchrun agent per virtual node; waits for them all (the first
    to fail stops the others)."""
    nodes, gpn = n // 8, 8
    uuids = gpu_uuids()
    if len(uuids) < n:
        print(f"FAIL the job has {len(uuids)} GPUs, {n} needed", flush=True)
        return 1
    port = free_port()
    procs = []
    for k in range(nodes):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(uuids[k * gpn:(k + 1) * gpn]), VGPU_NODE_INDEX=str(k))
        # Static rendezvous: agent k's ranks are 8k..8k+7, on node k's GPUs, as the global
        # layout says (c10d would number the agents in their order of arrival).
        procs.append(subprocess.Popen(
            ["torchrun", "--nnodes", str(nodes), "--node-rank", str(k), "--nproc-per-node", str(gpn),
             "--master-addr", "127.0.0.1", "--master-port", str(port),
             os.path.join(ROOT, "tests/gpu/fidelity/train_step.py"), "ddp"] + step_args, env=env))
    status = 0
    while any(p.poll() is None for p in procs):
        failed = [p.returncode for p in procs if p.returncode not in (None, 0)]
        if failed:
            status = failed[0]
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            break
        time.sleep(0.5)
    for p in procs:
        rc = p.wait()
        status = status or rc
    return status


DEFAULT_STEP_ARGS = ["--batch", "1", "--seq", "512", "--steps", "3", "--warmup", "1"]


def vgpu_run(lib):
    """The vgpu-run command line up to its options: SIM_VGPU_RUN's, else the repository's with the
    staged libraries and tools of LIB (.device/lib) and its sibling bin folder."""
    if os.environ.get("SIM_VGPU_RUN"):
        return [os.environ["SIM_VGPU_RUN"]]
    return [sys.executable, os.path.join(ROOT, "vgpu/tools/vgpu-run"), "--lib-dir", lib,
            "--bin-dir", os.path.join(os.path.dirname(lib), "bin")]


def run_captured(cmd, env, timeout=None):
    """Runs cmd in a session of its own with stdout and stderr together: (exit status, output).
    Past `timeout` seconds the whole session (vgpu-run, torchrun, every rank) is killed and the
    status is 124, as timeout(1) says."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = p.communicate()
        return 124, (out or "") + f"\n(killed after {timeout} s)\n"


def job_command(n, lib, step_args, vgpu_options=()):
    """The vgpu-run command of an N-rank DDP job on the sim backend (see the module's text), or
    None when N cannot be laid out (more than 8 ranks, not whole nodes of 8)."""
    nodes = max(1, n // 8)
    cmd = vgpu_run(lib) + ["--backend", "sim", "--nodes", str(nodes), "--gpus", str(min(n, 8)), "--no-summary",
                           *vgpu_options, "--"]
    if n > 8:
        if n % 8:
            return None
        return cmd + [sys.executable, os.path.abspath(__file__), "--agents", str(n), "--"] + step_args
    return cmd + ["torchrun", "--standalone", "--nproc_per_node", str(n),
                  os.path.join(ROOT, "tests/gpu/fidelity/train_step.py"), "ddp"] + step_args


def run_job(n, lib, step_args=None, vgpu_options=(), log=None, timeout=None):
    """Runs the N-rank job (vgpu_options: more vgpu-run options, e.g. --kernel-db DB --model M)
    while sampling its ranks' memory. Returns a dict: result (train_step.py's RESULT, or None),
    rc, wall_s (the job's), peak (kB per rank: anon, file, hwm; total_anon of all ranks at once;
    ranks_seen) and output (the job's stdout and stderr). `log`: a file that gets the output;
    `timeout`: seconds before the job is killed (rc 124)."""
    step_args = list(step_args or DEFAULT_STEP_ARGS)
    cmd = job_command(n, lib, step_args, vgpu_options)
    if cmd is None:
        return {"result": None, "rc": 2, "wall_s": 0.0, "peak": {}, "nodes": 0,
                "output": f"{n} ranks: more than 8 must be whole nodes of 8"}
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
    rc, out = run_captured(cmd, dict(os.environ, PYTHONUNBUFFERED="1",
                                     VGPU_LOG_LEVEL=os.environ.get("VGPU_LOG_LEVEL", "warn")), timeout)
    wall = time.time() - t0
    done.set()
    t.join()
    if log:
        with open(log, "w") as f:
            f.write(out)
    return {"result": step_result(out), "rc": rc, "wall_s": wall, "peak": peak, "output": out,
            "nodes": max(1, n // 8)}


def step_result(output):
    """train_step.py's RESULT (rank 0's line) in a job's output, or None."""
    result = None
    for line in output.splitlines():
        if line.startswith("RESULT "):
            try:
                result = json.loads(line[7:])
            except ValueError:
                pass
    return result


def main():
    args = sys.argv[1:]
    if args and args[0] == "--agents":  # the job's top process (see agents())
        extra = args[args.index("--") + 1:] if "--" in args else []
        return agents(int(args[1]), extra)
    extra = []
    if "--" in args:
        i = args.index("--")
        args, extra = args[:i], args[i + 1:]
    n = int(args[0])
    lib = args[1] if len(args) > 1 else os.path.join(ROOT, ".device", "lib")
    job = run_job(n, lib, extra or None, log=os.environ.get("SCALE_LOG"))
    result, peak, wall, nodes = job["result"], job["peak"], job["wall_s"], job["nodes"]
    if result is None:
        print(f"FAIL scale {n}: exit {job['rc']} after {wall:.1f} s")
        for line in job["output"].splitlines()[-12:]:
            print("   " + line[:300])
        return 1
    print(f"scale {n} ranks ({nodes} x {min(n, 8)}): virtual step {result['step_ms']} ms (steps {result['steps_ms']}), "
          f"wall per step {result.get('wall_ms')} ms, job {wall:.1f} s; per rank peak RssAnon "
          f"{peak['anon'] / 1024:.0f} MiB, RssFile {peak['file'] / 1024:.0f} MiB, VmHWM {peak['hwm'] / 1024:.0f} MiB; "
          f"all ranks' RssAnon at once {peak.get('total_anon', 0) / 1048576:.1f} GiB ({peak['ranks_seen']} ranks seen)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
