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
"""
import ctypes
import json
import os
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
    bindir = os.path.join(os.path.dirname(lib), "bin")
    nodes = max(1, n // 8)
    step_args = extra or ["--batch", "1", "--seq", "512", "--steps", "3", "--warmup", "1"]
    cmd = [sys.executable, os.path.join(ROOT, "vgpu/tools/vgpu-run"), "--lib-dir", lib, "--bin-dir", bindir,
           "--backend", "sim", "--nodes", str(nodes), "--gpus", str(min(n, 8)), "--no-summary", "--"]
    if n > 8:
        if n % 8:
            print(f"FAIL {n} ranks: more than 8 must be whole nodes of 8")
            return 2
        cmd += [sys.executable, os.path.abspath(__file__), "--agents", str(n), "--"] + step_args
    else:
        cmd += ["torchrun", "--standalone", "--nproc_per_node", str(n),
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
