"""vgpu-run, the build-tree copy, run as a user runs it (sim backend, no GPU).

Environment (set by tests/tools/meson.build): VGPU_RUN, VGPU_BUILD_ROOT, VGPU_CUDART_PROGRAM
(empty when nvcc was not found)."""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

RUN = os.environ["VGPU_RUN"]
BUILD = os.environ["VGPU_BUILD_ROOT"]
CUDART_PROGRAM = os.environ.get("VGPU_CUDART_PROGRAM", "")
STRUCT_GARBAGE_PROGRAM = os.environ.get("VGPU_STRUCT_GARBAGE_PROGRAM", "")
SMI = os.path.join(BUILD, "vgpu", "tools", "vgpu-smi")
PLUGIN = os.path.join(BUILD, "nccl_plugin", "libnccl-net-vgpu.so")
VCLOCK = os.path.join(BUILD, "vgpu", "vclock", "libvgpu-vclock.so")


def clean_env(daemon_dir, **extra):
    """The caller's environment without anything that would steer vgpu or NCCL."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VGPU_", "NCCL_")) or k == "VGPU_LOG_LEVEL"}
    env["VGPU_DAEMON_DIR"] = daemon_dir
    env.update(extra)
    return env


def summary_rows(stderr):
    """(index, memory peak MiB, clock s, busy s, util %, kernels) per row of the summary."""
    return [(int(a), int(b), float(c), float(d), int(e), int(f)) for a, b, c, d, e, f in
            re.findall(r"^\s+(\d+)\s+(\d+) MiB\s+([0-9.]+) s\s+([0-9.]+) s\s+(\d+) %\s+(\d+)$",
                       stderr, re.M)]


# A driver-API client in python (ctypes over the sim libcuda.so.1 that vgpu-run puts on the
# library path): 1 GiB on device 2, held for a second, so the memory peak is sampled for sure.
HOLD_MEMORY = """
import ctypes, sys, time
cu = ctypes.CDLL("libcuda.so.1")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
assert cu.cuInit(0) == 0
assert cu.cuDeviceGet(ctypes.byref(dev), 2) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
assert cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 30)) == 0
time.sleep(1.0)
print("held")
"""


# --virtual-clock, seen from python (ctypes over the sim driver): one launch of an empty PTX
# kernel that the fallback model times at about 4.1 s of virtual time (2^20 x 800 blocks of
# 1024 threads; tests/vclock/shim_test.cpp), which the sim does not execute. time.perf_counter
# and time.time on this thread move by the kernel's virtual duration (cuEventElapsedTime);
# a thread that never calls the driver reads real time; time.sleep on this thread still
# sleeps its real duration. Real time comes from os.times(), which no clock shim sees.
VIRTUAL_CLOCK = r"""
import ctypes, json, os, threading, time
cu = ctypes.CDLL("libcuda.so.1")
PTX = b'''
.version 8.0
.target sm_90
.address_size 64
.visible .entry vclock_spin()
{
    ret;
}
'''
def ok(r):
    assert r == 0, r
V = ctypes.c_void_p
dev, ctx, mod, fn = ctypes.c_int(), V(), V(), V()
e0, e1 = V(), V()
ok(cu.cuInit(0))
ok(cu.cuDeviceGet(ctypes.byref(dev), 0))
ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
ok(cu.cuCtxSetCurrent(ctx))
ok(cu.cuModuleLoadData(ctypes.byref(mod), PTX))
ok(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"vclock_spin"))
ok(cu.cuEventCreate(ctypes.byref(e0), 0))
ok(cu.cuEventCreate(ctypes.byref(e1), 0))
ok(cu.cuEventRecord(e0, None))  # the first submission: this thread now has a virtual clock
ok(cu.cuEventSynchronize(e0))
out = {}
r0, p0, t0 = os.times().elapsed, time.perf_counter(), time.time()
ok(cu.cuEventRecord(e0, None))
ok(cu.cuLaunchKernel(fn, 1 << 20, 800, 1, 1024, 1, 1, 0, None, None, None))
ok(cu.cuEventRecord(e1, None))
ok(cu.cuEventSynchronize(e1))
out["perf_counter"], out["time"] = time.perf_counter() - p0, time.time() - t0
out["real"] = os.times().elapsed - r0
ms = ctypes.c_float()
ok(cu.cuEventElapsedTime(ctypes.byref(ms), e0, e1))
out["virtual"] = ms.value / 1e3
def other():
    a, r = time.perf_counter(), os.times().elapsed
    time.sleep(0.3)
    out["other_perf_counter"], out["other_real"] = time.perf_counter() - a, os.times().elapsed - r
t = threading.Thread(target=other)
t.start()
t.join()
r0, p0 = os.times().elapsed, time.perf_counter()
time.sleep(0.3)
out["sleep_perf_counter"], out["sleep_real"] = time.perf_counter() - p0, os.times().elapsed - r0
print(json.dumps(out))
"""


def parse_env(text):
    out = {}
    for line in text.splitlines():
        name, value = shlex.split(line)[0].split("=", 1)
        out[name] = value
    return out


class VgpuRunTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="vgpu-run-test-")
        self.daemon_dir = os.path.join(self.tmp, "daemon")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_vgpu(self, *args, timeout=120, **extra_env):
        return subprocess.run([RUN, *args], env=clean_env(self.daemon_dir, **extra_env),
                              capture_output=True, text=True, timeout=timeout)

    def assert_refused(self, r, *needles):
        self.assertEqual(r.returncode, 2, r.stderr)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, f"expected one line, got: {r.stderr!r}")
        self.assertTrue(lines[0].startswith("vgpu-run: "), lines[0])
        for n in needles:
            self.assertIn(n, lines[0])

    # --- --print-env -------------------------------------------------------------------------

    def test_print_env_sim(self):
        r = self.run_vgpu("--backend", "sim", "--print-env")
        self.assertEqual(r.returncode, 0, r.stderr)
        env = parse_env(r.stdout)
        ld = env["LD_LIBRARY_PATH"].split(":")
        self.assertEqual(ld[:2], [os.path.join(BUILD, "vgpu"), os.path.join(BUILD, "vgpu", "nvml")])
        self.assertNotIn("VGPU_REAL_LIBCUDA", env)
        self.assertEqual(env["NCCL_NET_PLUGIN"], PLUGIN)
        self.assertEqual(env["NCCL_PROFILER_PLUGIN"], PLUGIN)  # tells each transfer's kernel launch
        # The sim backend runs no kernel: NCCL's network transport would wait for them forever,
        # so NCCL uses its P2P transport (tests/programs/run_nccl_program.py).
        self.assertNotIn("NCCL_NET", env)
        self.assertEqual(env["NCCL_P2P_DISABLE"], "0")
        self.assertEqual(env["NCCL_SHM_DISABLE"], "0")
        self.assertEqual(env["NCCL_NVLS_ENABLE"], "0")
        self.assertNotIn("NCCL_IB_DISABLE", env)
        self.assertNotIn("NCCL_HOSTID", env)
        self.assertEqual(env["VGPU_SIMCORE"], "daemon")
        self.assertEqual(env["VGPU_VGPUD"], os.path.join(BUILD, "simcore", "daemon", "vgpud"))
        self.assertRegex(env["VGPU_JOB_ID"], r"^[A-Za-z0-9_-]{1,32}$")
        for name in ("VGPU_CONFIG", "VGPU_NODES", "VGPU_GPUS_PER_NODE", "VGPU_GPU_MODEL"):
            self.assertNotIn(name, env)
        # The topology: 8 GPUs, each under a switch with its own NIC named as the plugin names it.
        self.assertTrue(env["NCCL_TOPO_FILE"].startswith(self.daemon_dir + "/"))
        root = ET.parse(env["NCCL_TOPO_FILE"]).getroot()
        self.assertEqual(root.tag, "system")
        self.assertEqual(root.get("version"), "1")
        gpus, nics = [], []
        for switch in root.find("cpu"):
            self.assertEqual(switch.get("class"), "0x060400")
            kids = list(switch)
            gpus += [k.get("busid") for k in kids if k.get("class") == "0x030200"]
            nets = [n.get("name") for k in kids for n in k.iter("net")]
            self.assertEqual(len(nets), 1, ET.tostring(switch))
            self.assertEqual(len([k for k in kids if k.get("class") == "0x030200"]), 1)
            nics += nets
        self.assertEqual(len(set(gpus)), 8)
        self.assertTrue(all(re.fullmatch(r"0000:[0-9a-f]{2}:00\.0", g) for g in gpus), gpus)
        self.assertEqual(sorted(nics), [f"vgpu-nic{i}" for i in range(8)])

    def test_print_env_cluster_options(self):
        r = self.run_vgpu("--nodes", "2", "--gpus", "4", "--model", "H200", "--memory", "100GiB",
                          "--job-id", "tools-test-1", "--timeline", "t.json", "--print-env")
        self.assertEqual(r.returncode, 0, r.stderr)
        env = parse_env(r.stdout)
        self.assertEqual(env["VGPU_NODES"], "2")
        self.assertEqual(env["VGPU_GPUS_PER_NODE"], "4")
        self.assertEqual(env["VGPU_GPU_MODEL"], "H200")
        self.assertEqual(env["VGPU_MEMORY"], "100GiB")
        self.assertEqual(env["VGPU_JOB_ID"], "tools-test-1")
        self.assertEqual(env["VGPU_TIMELINE"], os.path.abspath("t.json"))
        root = ET.parse(env["NCCL_TOPO_FILE"]).getroot()
        gpus = [p.get("busid") for p in root.iter("pci") if p.get("class") == "0x030200"]
        self.assertEqual(len(gpus), 8)
        self.assertEqual(sorted({g[:4] for g in gpus}), ["0000", "0001"])  # a domain per node
        self.assertEqual(len(list(root.iter("net"))), 4)  # one NIC per GPU of a node

    def test_print_env_passthrough_takes_the_given_driver(self):
        real = os.path.join(BUILD, "vgpu", "libcuda.so.1")  # any library will do for print-env
        r = self.run_vgpu("--backend", "passthrough", "--print-env", VGPU_REAL_LIBCUDA=real)
        self.assertEqual(r.returncode, 0, r.stderr)
        env = parse_env(r.stdout)
        self.assertEqual(env["LD_LIBRARY_PATH"].split(":")[0],
                         os.path.join(BUILD, "vgpu", "passthrough"))
        self.assertEqual(env["VGPU_REAL_LIBCUDA"], real)

    def test_record_on_several_virtual_gpus_without_mps_says_what_it_risks(self):
        real = os.path.join(BUILD, "vgpu", "libcuda.so.1")  # any library will do for print-env
        db = os.path.join(self.tmp, "k.db")
        note = "--record on 2 virtual GPUs without --mps"
        r = self.run_vgpu("--backend", "passthrough", "--gpus", "2", "--record", db, "--print-env",
                          VGPU_REAL_LIBCUDA=real)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sum(note in l for l in r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("record with --mps", r.stderr)
        # One virtual GPU, or --mps: nothing to say.
        for args in (("--gpus", "1"), ("--gpus", "2", "--mps")):
            r = self.run_vgpu("--backend", "passthrough", *args, "--record", db, "--print-env",
                              VGPU_REAL_LIBCUDA=real)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("without --mps", r.stderr)

    def test_auto_without_a_driver_is_sim(self):
        if os.path.exists("/dev/nvidiactl"):
            self.skipTest("this machine has an NVIDIA driver")
        r = self.run_vgpu("--print-env", VGPU_REAL_LIBCUDA=os.path.join(BUILD, "vgpu", "libcuda.so.1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(parse_env(r.stdout)["LD_LIBRARY_PATH"].split(":")[0],
                         os.path.join(BUILD, "vgpu"))

    def test_print_env_virtual_clock(self):
        # The virtual clock is the default; --real-clock leaves the job's clocks alone.
        r = self.run_vgpu("--print-env")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(parse_env(r.stdout)["LD_PRELOAD"], VCLOCK)
        r = self.run_vgpu("--real-clock", "--print-env")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("LD_PRELOAD", parse_env(r.stdout))
        r = self.run_vgpu("--virtual-clock", "--print-env")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(parse_env(r.stdout)["LD_PRELOAD"], VCLOCK)
        # The caller's preloads stay, first (a sanitizer runtime must lead); no second copy.
        r = self.run_vgpu("--virtual-clock", "--print-env", LD_PRELOAD="/x/liba.so:/x/libb.so")
        self.assertEqual(parse_env(r.stdout)["LD_PRELOAD"], f"/x/liba.so /x/libb.so {VCLOCK}")
        r = self.run_vgpu("--virtual-clock", "--print-env", LD_PRELOAD=f"{VCLOCK} /x/liba.so")
        self.assertEqual(parse_env(r.stdout)["LD_PRELOAD"], f"{VCLOCK} /x/liba.so")

    def test_the_job_has_its_own_kernel_time_database(self):
        # Ranks share their kernel measurements through a database private to the job, removed
        # when it ends; a database the caller names is used as it is, and kept.
        r = self.run_vgpu("--backend", "sim", "--no-summary", "--", "sh", "-c",
                          'test -d "$VGPU_KERNEL_DB" && echo "$VGPU_KERNEL_DB"')
        self.assertEqual(r.returncode, 0, r.stderr)
        path = r.stdout.strip().splitlines()[-1]
        self.assertIn("kernel-times-", os.path.basename(path))
        self.assertFalse(os.path.exists(path), path)
        mine = os.path.join(self.tmp, "mine")
        os.makedirs(mine)
        r = self.run_vgpu("--backend", "sim", "--print-env", VGPU_KERNEL_DB=mine)
        self.assertNotIn("VGPU_KERNEL_DB", parse_env(r.stdout))
        self.assertTrue(os.path.isdir(mine))

    def test_users_nccl_settings_are_replaced_with_a_note(self):
        real = os.path.join(BUILD, "vgpu", "libcuda.so.1")  # any library will do for print-env
        r = self.run_vgpu("--backend", "passthrough", "--print-env", NCCL_P2P_DISABLE="0",
                          NCCL_NET="IB", VGPU_REAL_LIBCUDA=real)
        self.assertEqual(r.returncode, 0, r.stderr)
        env = parse_env(r.stdout)
        self.assertEqual((env["NCCL_P2P_DISABLE"], env["NCCL_NET"]), ("1", "vgpu"))
        self.assertIn("NCCL_P2P_DISABLE=0 from the environment replaced by 1", r.stderr)
        self.assertIn("NCCL_NET=IB from the environment replaced by vgpu", r.stderr)
        # The sim backend: P2P on, NCCL_NET gone (the job does not see it either).
        r = self.run_vgpu("--backend", "sim", "--print-env", NCCL_P2P_DISABLE="1", NCCL_NET="vgpu")
        self.assertEqual(r.returncode, 0, r.stderr)
        env = parse_env(r.stdout)
        self.assertEqual(env["NCCL_P2P_DISABLE"], "0")
        self.assertNotIn("NCCL_NET", env)
        self.assertIn("NCCL_P2P_DISABLE=1 from the environment replaced by 0", r.stderr)
        self.assertIn("NCCL_NET=vgpu from the environment removed", r.stderr)
        r = self.run_vgpu("--backend", "sim", "--no-summary", "--", "sh", "-c", 'echo "net=${NCCL_NET-unset}"',
                          NCCL_NET="vgpu")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("net=unset", r.stdout)

    def test_users_own_nccl_profiler_is_kept_with_a_note(self):
        r = self.run_vgpu("--print-env", NCCL_PROFILER_PLUGIN="/opt/my/libnccl-profiler.so")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(parse_env(r.stdout)["NCCL_PROFILER_PLUGIN"], "/opt/my/libnccl-profiler.so")
        self.assertIn("NCCL_PROFILER_PLUGIN=/opt/my/libnccl-profiler.so from the environment kept", r.stderr)

    # --- refusals ------------------------------------------------------------------------------

    def test_empty_command(self):
        self.assert_refused(self.run_vgpu(), "no command given")
        self.assert_refused(self.run_vgpu("--gpus", "2", "--"), "no command given")

    def test_missing_plugin(self):
        lib = os.path.join(self.tmp, "lib")
        os.makedirs(os.path.join(lib, "sim"))
        os.symlink(os.path.join(BUILD, "vgpu", "libcuda.so.1"), os.path.join(lib, "sim", "libcuda.so.1"))
        os.symlink(os.path.join(BUILD, "vgpu", "nvml", "libnvidia-ml.so.1"),
                   os.path.join(lib, "libnvidia-ml.so.1"))
        r = self.run_vgpu("--backend", "sim", "--lib-dir", lib, "--", "true")
        self.assert_refused(r, "libnccl-net-vgpu.so", os.path.join(lib, "libnccl-net-vgpu.so"),
                            "not found")
        # With the plugin there, the same folder works.
        os.symlink(PLUGIN, os.path.join(lib, "libnccl-net-vgpu.so"))
        r = self.run_vgpu("--backend", "sim", "--lib-dir", lib, "--print-env")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(parse_env(r.stdout)["NCCL_NET_PLUGIN"], os.path.join(lib, "libnccl-net-vgpu.so"))

    def test_passthrough_without_a_driver(self):
        r = self.run_vgpu("--backend", "passthrough", "--", "true",
                          VGPU_REAL_LIBCUDA="/nonexistent/libcuda.so.1")
        self.assert_refused(r, "no real libcuda.so.1", "/nonexistent/libcuda.so.1",
                            "VGPU_REAL_LIBCUDA")

    def test_bad_config(self):
        self.assert_refused(self.run_vgpu("--config", "/nonexistent.toml", "--", "true"),
                            "cluster configuration rejected", "/nonexistent.toml", "no such file",
                            "--config")
        self.assert_refused(self.run_vgpu("--model", "NOPE-9000", "--", "true"),
                            "unknown GPU model", "NOPE-9000", "--model")
        self.assert_refused(self.run_vgpu("--gpus", "65", "--", "true"),
                            "VGPU_GPUS_PER_NODE", "--gpus")
        toml = os.path.join(self.tmp, "typo.toml")
        with open(toml, "w") as f:
            f.write("[cluster]\nnodes = 1\ngpus_per_nod = 8\n")
        self.assert_refused(self.run_vgpu("--config", toml, "--", "true"), f"{toml}:3:")
        self.assert_refused(self.run_vgpu("--gpus", "zero", "--", "true"), "--gpus")

    def test_virtual_clock_without_the_shim(self):
        lib = os.path.join(self.tmp, "lib")
        os.makedirs(os.path.join(lib, "sim"))
        os.symlink(os.path.join(BUILD, "vgpu", "libcuda.so.1"), os.path.join(lib, "sim", "libcuda.so.1"))
        os.symlink(os.path.join(BUILD, "vgpu", "nvml", "libnvidia-ml.so.1"),
                   os.path.join(lib, "libnvidia-ml.so.1"))
        os.symlink(PLUGIN, os.path.join(lib, "libnccl-net-vgpu.so"))
        r = self.run_vgpu("--backend", "sim", "--lib-dir", lib, "--virtual-clock", "--", "true")
        self.assert_refused(r, "--virtual-clock", "libvgpu-vclock.so",
                            os.path.join(lib, "libvgpu-vclock.so"), "not found")
        # Without --virtual-clock named, the same folder is enough (the clocks stay real, with a
        # note); with the shim there, it is used.
        r = self.run_vgpu("--backend", "sim", "--lib-dir", lib, "--print-env")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("LD_PRELOAD", parse_env(r.stdout))
        self.assertIn("libvgpu-vclock.so) is not there", r.stderr)
        os.symlink(VCLOCK, os.path.join(lib, "libvgpu-vclock.so"))
        r = self.run_vgpu("--backend", "sim", "--lib-dir", lib, "--virtual-clock", "--print-env")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(parse_env(r.stdout)["LD_PRELOAD"], os.path.join(lib, "libvgpu-vclock.so"))

    def test_bad_job_id(self):
        self.assert_refused(self.run_vgpu("--job-id", "a/b", "--", "true"), "--job-id")

    # --- running commands ----------------------------------------------------------------------

    def test_exit_status_is_the_commands(self):
        r = self.run_vgpu("--", "sh", "-c", "exit 7")
        self.assertEqual(r.returncode, 7, r.stderr)
        self.assertIn("command ended with exit status 7", r.stderr)
        r = self.run_vgpu("--", "sh", "-c", "kill -TERM $$")
        self.assertEqual(r.returncode, 128 + 15, r.stderr)
        self.assertIn("command ended with signal 15", r.stderr)
        r = self.run_vgpu("--", "/nonexistent/program")
        self.assertEqual(r.returncode, 127, r.stderr)
        r = self.run_vgpu("sh", "-c", "exit 3")  # without "--" too
        self.assertEqual(r.returncode, 3, r.stderr)

    def test_the_command_gets_the_environment(self):
        r = self.run_vgpu("--job-id", "tools-test-env", "--gpus", "2", "--",
                          "sh", "-c", 'echo "$VGPU_JOB_ID $VGPU_GPUS_PER_NODE $NCCL_P2P_DISABLE $LD_LIBRARY_PATH"')
        self.assertEqual(r.returncode, 0, r.stderr)
        job, gpus, p2p_off, ld = r.stdout.split()
        self.assertEqual((job, gpus, p2p_off), ("tools-test-env", "2", "0"))  # the sim backend's
        self.assertTrue(ld.startswith(os.path.join(BUILD, "vgpu") + ":"), ld)

    def test_vgpu_smi_under_vgpu_run_sees_8_devices(self):
        r = self.run_vgpu("--", SMI, "-L")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(re.findall(r"^GPU \d+: ", r.stdout, re.M)), 8, r.stdout)
        self.assertIn("backend sim, 8 x NVIDIA H100 80GB HBM3 (1 node x 8)", r.stderr)
        self.assertIn("no process of the job used the virtual GPUs", r.stderr)

    def test_kernel_db_lists_the_signatures_it_lacks(self):
        if not CUDART_PROGRAM or not os.path.isfile(CUDART_PROGRAM):
            self.skipTest("no nvcc-built cudart program in this build")
        import sqlite3
        db = os.path.join(self.tmp, "kernels.sqlite")
        r = self.run_vgpu("--backend", "sim", "--kernel-db", db, "--print-env")
        env = parse_env(r.stdout)
        self.assertEqual(env["VGPU_KERNEL_DB"], db)
        self.assertTrue(env["VGPU_KERNEL_DB_MISSES"].startswith(self.daemon_dir + "/"))
        # An empty database: every kernel of the program is listed, with the time it was given.
        r = self.run_vgpu("--backend", "sim", "--kernel-db", db, "--no-summary", "--", CUDART_PROGRAM)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"(\d+) launch signature\(s\) \((\d+) launches\) were not in it .*\(all in (\S+)\):",
                      r.stderr)
        self.assertIsNotNone(m, r.stderr)
        self.assertGreater(int(m.group(1)), 0)
        self.assertRegex(r.stderr, r"x +\d+\.\d{3} us  \S+")
        self.assertRegex(r.stderr, r"by cause: new-kernel \d+ \(\d+ launches: kernel/shape never recorded\)")
        # Record every listed signature in the database: the next run finds them all.
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE IF NOT EXISTS kernel_times(gpu_model TEXT NOT NULL, signature BLOB "
                    "NOT NULL, kernel_name TEXT NOT NULL, grid_x INTEGER, grid_y INTEGER, grid_z "
                    "INTEGER, block_x INTEGER, block_y INTEGER, block_z INTEGER, shared_bytes "
                    "INTEGER, duration_ns INTEGER NOT NULL, samples INTEGER NOT NULL, updated_at "
                    "INTEGER NOT NULL, PRIMARY KEY (gpu_model, signature))")
        with open(m.group(3)) as f:
            for line in f:
                if line.startswith("#answered\t"):  # launches per level of the database
                    self.assertRegex(line, r"^#answered\texact=0\tgroup=0\twork-key=0\tfamily=0\tfallback=[1-9]\d*$")
                    continue
                launches, seconds, name, grid, block, sig, cause = line.rstrip("\n").split("\t")
                self.assertEqual(cause, "new-kernel")  # an empty database
                # The time the fallback gave, so that the program sees the same durations; keyed by
                # the model name the driver uses.
                con.execute("INSERT OR REPLACE INTO kernel_times VALUES(?, ?, ?, 1, 1, 1, 1, 1, 1, 0, "
                            "?, 1, 0)", ("NVIDIA H100 80GB HBM3", bytes.fromhex(sig), name,
                                         round(float(seconds) * 1e9)))
        con.commit()
        con.close()
        r = self.run_vgpu("--backend", "sim", "--kernel-db", db, "--no-summary", "--", CUDART_PROGRAM)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"kernel database {db}: every launch signature was found", r.stderr)
        self.assertRegex(r.stderr, r"launches answered: exact row [1-9]\d*, settled group 0, work key 0, "
                                   r"same kernel and shape 0, fallback model 0 \(\d+ of \d+ from the database, 100\.0%\)")
        # --record measures on a GPU: refused on the sim backend, and with --kernel-db.
        self.assert_refused(self.run_vgpu("--backend", "sim", "--record", db, "--", "true"),
                            "--record needs the passthrough backend")

    def test_record_then_replay_finds_launches_with_other_garbage(self):
        # Record once (the passthrough, over the sim's library as its "real GPU"), simulate: the
        # program's launches carry new stack-like garbage in a by-value struct every time, in the
        # recording and in the replay, and the replay still finds every one (issue 23).
        if not STRUCT_GARBAGE_PROGRAM or not os.path.isfile(STRUCT_GARBAGE_PROGRAM):
            self.skipTest("no nvcc-built struct_garbage_program in this build")
        db = os.path.join(self.tmp, "recorded.sqlite")
        sim = os.path.join(BUILD, "vgpu", "libcuda.so.1")
        r = self.run_vgpu("--backend", "passthrough", "--job-id", "tools-test-record", "--no-summary",
                          "--record", db, "--", STRUCT_GARBAGE_PROGRAM, timeout=150,
                          VGPU_REAL_LIBCUDA=sim, VGPU_PHYSICAL_DEVICES="0")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("struct garbage launches: 40", r.stdout)
        r = self.run_vgpu("--backend", "sim", "--kernel-db", db, "--no-summary", "--", STRUCT_GARBAGE_PROGRAM)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"kernel database {db}: every launch signature was found", r.stderr)

    def test_cudart_program(self):
        if not CUDART_PROGRAM or not os.path.isfile(CUDART_PROGRAM):
            self.skipTest("no nvcc-built cudart program in this build")
        timeline = os.path.join(self.tmp, "trace.json")
        r = self.run_vgpu("--job-id", "tools-test-cudart", "--timeline", timeline,
                          "--sample-interval", "0.05", "--", CUDART_PROGRAM, timeout=150)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("0 check(s) failed", r.stdout)
        self.assertIn("== vgpu-run: job tools-test-cudart, backend sim, 8 x NVIDIA H100 80GB HBM3",
                      r.stderr)
        rows = summary_rows(r.stderr)
        self.assertEqual([row[0] for row in rows], list(range(8)), r.stderr)
        # vgpu-run removes the region its job left for it (VGPU_STATUS_KEEP).
        self.assertFalse(os.path.exists(f"/dev/shm/vgpu-{os.getuid()}-tools-test-cudart"))
        # The driver does not write virtual clocks into the status region yet (status::Writer's
        # advance_clock/add_work have no caller): the summary says so instead of printing 0 s.
        if max(row[2] for row in rows) > 0:
            virtual = float(re.search(r"virtual time ([0-9.]+) s", r.stderr).group(1))
            self.assertEqual(virtual, max(row[2] for row in rows))
        else:
            self.assertIn("virtual time not reported", r.stderr)
        self.assertIn(f"timeline (written): {timeline}", r.stderr)
        self.assertTrue(os.path.getsize(timeline) > 0)
        # The region is gone, and so is vgpu-run's copy of it.
        uid = os.getuid()
        self.assertFalse(os.path.exists(f"/dev/shm/vgpu-{uid}-tools-test-cudart"))
        self.assertFalse(os.path.exists(f"/dev/shm/vgpu-{uid}-tools-test-cudart.final"))

    def test_passthrough_summary_counts_measured_launches(self):
        # The passthrough over the sim's library as its "real driver": the summary adds up the
        # launch counts of every process (VGPU_LAUNCH_STATS, launch_stats.py).
        if not CUDART_PROGRAM or not os.path.isfile(CUDART_PROGRAM):
            self.skipTest("no nvcc-built cudart program in this build")
        sim = os.path.join(BUILD, "vgpu", "libcuda.so.1")
        r = self.run_vgpu("--backend", "passthrough", "--job-id", "tools-test-stats", "--",
                          CUDART_PROGRAM, timeout=150, VGPU_REAL_LIBCUDA=sim, VGPU_PHYSICAL_DEVICES="0")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        m = re.search(r"kernel launches with a signature: (\d+), measured on the GPU (\d+) "
                      r"\(([0-9.]+)%\), settled (\d+), from the kernel-time database (\d+)", r.stderr)
        self.assertIsNotNone(m, r.stderr)
        launches, measured, _, settled, from_db = (int(float(g)) for g in m.groups())
        self.assertGreater(launches, 0)
        self.assertEqual(launches, measured + settled + from_db)
        self.assertFalse(os.path.exists(os.path.join(self.daemon_dir, "launch-stats-tools-test-stats")))
        # Given by the caller, VGPU_LAUNCH_STATS is the caller's: no line.
        own = os.path.join(self.tmp, "stats")
        r = self.run_vgpu("--backend", "passthrough", "--job-id", "tools-test-stats2", "--",
                          CUDART_PROGRAM, timeout=150, VGPU_REAL_LIBCUDA=sim, VGPU_PHYSICAL_DEVICES="0",
                          VGPU_LAUNCH_STATS=own)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("kernel launches with a signature", r.stderr)
        self.assertTrue(os.path.isfile(own))

    def test_memory_peak_is_sampled(self):
        r = self.run_vgpu("--job-id", "tools-test-memory", "--sample-interval", "0.1", "--",
                          "python3", "-c", HOLD_MEMORY)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.strip(), "held")
        rows = summary_rows(r.stderr)
        self.assertEqual(len(rows), 8, r.stderr)
        peaks = [row[1] for row in rows]
        # 1 GiB plus what the first context costs on an H100 (527 MiB), on device 2 only.
        self.assertGreaterEqual(peaks[2], 1024, r.stderr)
        self.assertLess(peaks[2], 2048, r.stderr)
        self.assertEqual(peaks[:2] + peaks[3:], [0] * 7, r.stderr)

    def test_virtual_clock_python(self):
        r = self.run_vgpu("--virtual-clock", "--no-summary", "--", "python3", "-c", VIRTUAL_CLOCK)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        virtual = out["virtual"]
        self.assertGreater(virtual, 3.0, out)
        self.assertLess(out["real"], virtual / 2, out)  # the two can be told apart
        # This thread's clocks moved by the virtual duration (plus a little CPU time).
        for clock in ("perf_counter", "time"):
            self.assertGreaterEqual(out[clock], virtual - 1e-3, (clock, out))
            self.assertLess(out[clock], virtual + 0.2, (clock, out))
        # A thread that never called the driver: real time.
        self.assertGreater(out["other_perf_counter"], 0.25, out)
        self.assertLess(abs(out["other_perf_counter"] - out["other_real"]), 0.1, out)
        # A sleep on the GPU thread lasts its real 0.3 s (its deadline is moved onto the real
        # clock; it would otherwise wait out the virtual lead of ~4 s too) and does not advance
        # the virtual clock, which counts CPU time and GPU work.
        self.assertGreater(out["sleep_real"], 0.25, out)
        self.assertLess(out["sleep_real"], 2.0, out)
        self.assertLess(out["sleep_perf_counter"], 0.15, out)
        # The virtual clock is the default: the same without the option. With --real-clock the
        # same program reads real time.
        r = self.run_vgpu("--no-summary", "--", "python3", "-c", VIRTUAL_CLOCK)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertGreaterEqual(out["perf_counter"], out["virtual"] - 1e-3, out)
        r = self.run_vgpu("--real-clock", "--no-summary", "--", "python3", "-c", VIRTUAL_CLOCK)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertLess(out["perf_counter"], out["virtual"] / 2, out)
        self.assertGreater(out["sleep_perf_counter"], 0.25, out)

    def test_the_jobs_vgpud_is_stopped(self):
        # A rank's plugin starts vgpud on demand under the job's id; vgpu-run stops it at the end.
        script = ('"$VGPU_VGPUD" --job "$VGPU_JOB_ID" --idle-timeout -1 >/dev/null 2>&1 & '
                  'echo $!; i=0; while [ ! -S "$VGPU_DAEMON_DIR/$VGPU_JOB_ID.sock" ] && '
                  '[ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done')
        r = self.run_vgpu("--job-id", "tools-test-daemon", "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = int(r.stdout.split()[0])
        self.assertIn("vgpud was started for the job and stopped", r.stderr)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and self._running(pid):
            time.sleep(0.05)
        self.assertFalse(self._running(pid), f"vgpud {pid} still runs")
        for suffix in (".sock", ".lock"):
            self.assertFalse(os.path.exists(os.path.join(self.daemon_dir, "tools-test-daemon" + suffix)))

    # --- --mps (a stand-in nvidia-cuda-mps-control: no GPU here) ------------------------------

    def _fake_mps_control(self, exit_d=0):
        """A stand-in control program on PATH: `-d` marks the daemon running in its pipe folder,
        `quit` read on stdin unmarks it; every command is logged to MPS_TEST_LOG."""
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir, exist_ok=True)
        path = os.path.join(bindir, "nvidia-cuda-mps-control")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n"
                    'if [ "$1" = "-d" ]; then echo "-d $CUDA_MPS_PIPE_DIRECTORY" >> "$MPS_TEST_LOG"; '
                    'echo "job=${VGPU_JOB_ID:-none} lib=${LD_LIBRARY_PATH:-none}" > "$MPS_TEST_LOG.env"; '
                    f'echo running > "$CUDA_MPS_PIPE_DIRECTORY/state"; exit {exit_d}; fi\n'
                    'read cmd; echo "$cmd" >> "$MPS_TEST_LOG"; '
                    '[ "$cmd" = quit ] && rm -f "$CUDA_MPS_PIPE_DIRECTORY/state"; exit 0\n')
        os.chmod(path, 0o755)
        return {"PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
                "MPS_TEST_LOG": os.path.join(self.tmp, "mps.log"),
                "VGPU_REAL_LIBCUDA": os.path.join(BUILD, "vgpu", "libcuda.so.1")}

    def test_mps_daemon_runs_for_the_job_only(self):
        env = self._fake_mps_control()
        for command in ('cat "$CUDA_MPS_PIPE_DIRECTORY/state"; echo "$CUDA_MPS_PIPE_DIRECTORY"',
                        'echo "$CUDA_MPS_PIPE_DIRECTORY"; exit 5'):  # stopped whatever the exit status
            with self.subTest(command=command):
                os.makedirs(self.tmp, exist_ok=True)
                if os.path.exists(env["MPS_TEST_LOG"]):
                    os.remove(env["MPS_TEST_LOG"])
                r = self.run_vgpu("--backend", "passthrough", "--mps", "--job-id", "tools-test-mps", "--",
                                  "sh", "-c", command, LD_LIBRARY_PATH="/the/callers/lib", **env)
                self.assertEqual(r.returncode, 5 if "exit 5" in command else 0, r.stderr)
                pipe = r.stdout.split()[-1]
                if "cat" in command:
                    self.assertEqual(r.stdout.split()[0], "running")  # started before the command
                self.assertTrue(pipe.startswith(self.daemon_dir), pipe)  # the job's private folder
                self.assertIn("tools-test-mps", pipe)
                with open(env["MPS_TEST_LOG"]) as f:
                    self.assertEqual(f.read().split(), ["-d", pipe, "quit"])
                self.assertFalse(os.path.exists(os.path.dirname(pipe)), "the daemon's folder is left")
                self.assertIn("the job's MPS daemon was started and stopped", r.stderr)
                # The daemon (and the MPS server it starts) runs on the real driver: none of the
                # job's settings, no vgpu library on its path.
                with open(env["MPS_TEST_LOG"] + ".env") as f:
                    job, lib = f.read().split()
                self.assertEqual((job, lib), ("job=none", "lib=/the/callers/lib"))

    def test_mps_refused_without_its_control_program(self):
        r = self.run_vgpu("--backend", "passthrough", "--mps", "--no-summary", "--", "true",
                          PATH=os.path.dirname(sys.executable), VGPU_REAL_LIBCUDA=os.path.join(BUILD, "vgpu", "libcuda.so.1"))
        self.assert_refused(r, "--mps", "nvidia-cuda-mps-control is not on PATH")
        env = self._fake_mps_control(exit_d=3)
        r = self.run_vgpu("--backend", "passthrough", "--mps", "--no-summary", "--", "true", **env)
        self.assert_refused(r, "--mps", "exited with status 3")

    def test_mps_is_ignored_on_the_sim_backend(self):
        env = self._fake_mps_control()
        r = self.run_vgpu("--backend", "sim", "--mps", "--no-summary", "--", "sh", "-c",
                          'echo "x${CUDA_MPS_PIPE_DIRECTORY}x"', **env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "xx")
        self.assertIn("--mps applies to the passthrough backend", r.stderr)
        self.assertFalse(os.path.exists(env["MPS_TEST_LOG"]))

    @staticmethod
    def _running(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False


if __name__ == "__main__":
    unittest.main(verbosity=2)
