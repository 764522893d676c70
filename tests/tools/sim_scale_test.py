"""tests/gpu/sim_scale without PyTorch and without a GPU: everything but the training step.

The recording runs on the passthrough over the sim's library as its "real GPU" (as
vgpu_run_test.py's record test does), the training step is a stand-in `torchrun` on PATH that
runs the nvcc-built struct_garbage_program (by-value structs with new garbage at every launch)
once per agent and prints a RESULT line as train_step.py does, with a step time that grows with
the world size; the replays run on the sim backend at 2, 8 and 64 ranks (8 agents of 8) through
sim_torch_scale.run_job. Checked: the table's rows (cluster, step, ratio to the recording,
the collective model's all-reduce from the build's vgpu-collective, launches the database did not
answer out of those it was asked for), and the pieces alone (gradient size, model name, parsing).

Environment (tests/tools/meson.build): VGPU_RUN, VGPU_BUILD_ROOT, VGPU_STRUCT_GARBAGE_PROGRAM."""
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = os.environ["VGPU_BUILD_ROOT"]
RUN = os.environ["VGPU_RUN"]
PROGRAM = os.environ.get("VGPU_STRUCT_GARBAGE_PROGRAM", "")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "gpu", "sim_scale")
COLLECTIVE = os.path.join(BUILD, "simcore", "tools", "vgpu-collective")

sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
_loader = importlib.machinery.SourceFileLoader("sim_scale", SCRIPT)
_spec = importlib.util.spec_from_loader("sim_scale", _loader)
sim_scale = importlib.util.module_from_spec(_spec)
_loader.exec_module(sim_scale)

FAKE_TORCHRUN = r'''#!/usr/bin/env python3
import json, os, subprocess, sys
a = sys.argv[1:]
def opt(names, default):
    for n in names:
        if n in a:
            return a[a.index(n) + 1]
    return default
nproc = int(opt(["--nproc_per_node", "--nproc-per-node"], "1"))
nnodes = int(opt(["--nnodes"], "1"))
node = int(opt(["--node-rank"], "0"))
prog = os.environ.get("FAKE_TORCHRUN_PROGRAM")
if prog and node == 0:
    p = subprocess.run([prog], stdout=subprocess.PIPE, text=True)
    sys.stderr.write(p.stdout)
    if p.returncode:
        sys.exit(p.returncode)
if node == 0:
    world = nproc * nnodes
    step = 10.0 + world
    print("RESULT " + json.dumps({"mode": "ddp", "world": world, "step_ms": step, "steps_ms": [step] * 3,
                                  "wall_ms": 100.0 * world, "ranks_probe_ms": [[2.0] * 3] * world}), flush=True)
'''


class SimScaleParts(unittest.TestCase):
    def test_gpt2_small_gradient(self):
        self.assertEqual(sim_scale.gpt2_gradient_bytes(), 4 * 124_439_808)
        self.assertLess(sim_scale.gpt2_gradient_bytes(layers=2), sim_scale.gpt2_gradient_bytes())

    def test_model_of_the_physical_gpu(self):
        self.assertEqual(sim_scale.gpu_model("NVIDIA H200"), "H200-141GB")
        self.assertEqual(sim_scale.gpu_model("NVIDIA H100 80GB HBM3"), "H100-SXM-80GB")

    def test_train_step_option(self):
        self.assertEqual(sim_scale.option(["--batch", "1", "--layers", "4", "--layers", "6"], "--layers", 12), 6)
        self.assertEqual(sim_scale.option(["--batch", "1"], "--d", 768), 768)

    def test_answered_from_the_report(self):
        out = ("vgpu-run: kernel database /x.db: 3 launch signature(s) (7 launches) were not in it and got ...\n"
               "vgpu-run:   launches answered: exact row 10, settled group 20, work key 5, fallback model 7 "
               "(35 of 42 from the database, 83.3%)\n")
        self.assertEqual(sim_scale.answered(out), {"exact": 10, "group": 20, "work_key": 5, "family": 0, "fallback": 7,
                                                   "launches": 42, "collective": 0, "signatures_missed": 3})
        out = out.replace("work key 5, ", "work key 5, same kernel and shape 4, ")  # this build's report
        self.assertEqual(sim_scale.answered(out), {"exact": 10, "group": 20, "work_key": 5, "family": 4, "fallback": 7,
                                                   "launches": 46, "collective": 0, "signatures_missed": 3})
        # NCCL kernels, timed by the collective model, are named apart and not among the launches.
        out = out.replace("83.3%)", "83.3%); NCCL kernels 312, timed by the collective model")
        self.assertEqual(sim_scale.answered(out)["collective"], 312)
        self.assertEqual(sim_scale.answered(out)["launches"], 46)
        self.assertIsNone(sim_scale.answered("no report"))

    def test_replay_over_recording_by_host_state(self):
        rec = {"steps_ms": [40.0, 40.0, 40.0, 44.0, 44.0, 44.0], "ranks_probe_ms": [[2.0, 2.0, 2.0, 3.6, 3.6, 3.6]] * 2}
        sim = {"steps_ms": [44.4, 44.4, 44.4, 44.4], "ranks_probe_ms": [[3.6, 3.7, 3.6, 3.8]] * 2}
        self.assertEqual(sim_scale.host_state_line(rec, sim),
                         "sim / passthrough by host state: pooled 1.057 (6/4), fast - (3/0), slow 1.009 (3/4), "
                         "mixed - (0/0)")
        self.assertIsNone(sim_scale.host_state_line(rec, {"steps_ms": [1.0]}))  # no probes
        self.assertIsNone(sim_scale.host_state_line(None, sim))

    def test_table_without_a_recording(self):
        rows = [{"ranks": 8, "nodes": 1, "gpus_per_node": 8, "step_ms": 20.0, "wall_ms": 700.0, "rss_mib": 2000.0,
                 "bucket_us": 188.5, "gradient_ms": 3.6, "answered": None}]
        lines = sim_scale.table(rows, None, 2)
        self.assertEqual(len(lines), 3)
        self.assertEqual(lines[2], "| 8 | 1 x 8 | 20.00 | - | - | 188.5 | 3.60 | 700 | 2000 | - |")

    @unittest.skipUnless(os.path.isfile(COLLECTIVE), "vgpu-collective not built")
    def test_all_reduce_from_the_collective_model(self):
        grad = sim_scale.gpt2_gradient_bytes()
        b2, g2 = sim_scale.all_reduce_figures(COLLECTIVE, 2, 1, 2, "H100-SXM-80GB", grad)
        b64, g64 = sim_scale.all_reduce_figures(COLLECTIVE, 64, 8, 8, "H100-SXM-80GB", grad)
        self.assertGreater(b2, 0)
        self.assertGreater(b64, b2, "8 nodes over 400 Gb/s NICs are slower than NVLink")
        full, rest = divmod(grad, sim_scale.BUCKET)
        self.assertGreater(g2 * 1e3, full * b2)  # the last, partial bucket comes on top
        self.assertLess(g2 * 1e3, (full + 1) * b2)
        self.assertGreater(g64, g2)
        self.assertEqual(sim_scale.all_reduce_figures("/nonexistent", 2, 1, 2, "H100-SXM-80GB", grad), (None, None))


@unittest.skipUnless(PROGRAM and os.path.isfile(PROGRAM), "no nvcc-built struct_garbage_program")
class SimScaleRun(unittest.TestCase):
    def test_record_then_replay_at_2_8_and_64(self):
        tmp = tempfile.mkdtemp(prefix="vgpu-sim-scale-test-")
        try:
            bindir = os.path.join(tmp, "bin")
            os.makedirs(bindir)
            with open(os.path.join(bindir, "torchrun"), "w") as f:
                f.write(FAKE_TORCHRUN)
            os.chmod(os.path.join(bindir, "torchrun"), 0o755)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("VGPU_", "NCCL_"))}
            env.update(PATH=bindir + os.pathsep + os.environ["PATH"], VGPU_LOG_LEVEL="error",
                       VGPU_DAEMON_DIR=os.path.join(tmp, "daemon"), SIM_VGPU_RUN=RUN,
                       SIM_VGPU_COLLECTIVE=COLLECTIVE, FAKE_TORCHRUN_PROGRAM=PROGRAM,
                       VGPU_REAL_LIBCUDA=os.path.join(BUILD, "vgpu", "libcuda.so.1"), VGPU_PHYSICAL_DEVICES="0")
            p = subprocess.run([sys.executable, SCRIPT, "--out", os.path.join(tmp, "out"), "--model", "H100-SXM-80GB",
                                "--timeout", "120"], env=env, capture_output=True, text=True, timeout=400)
            out = p.stdout + p.stderr
            self.assertEqual(p.returncode, 0, out)
            self.assertIn("record: passthrough 2 GPUs, step 12.0 ms", out)
            self.assertTrue(os.path.getsize(os.path.join(tmp, "out", "kernels.db")) > 0, "nothing recorded")
            rows = [l.split(" | ") for l in out.splitlines() if l.startswith("| ") and l[2].isdigit()]
            self.assertEqual([(r[0], r[1], r[2], r[3], r[4]) for r in rows],
                             [("| 2", "1 x 2", "12.00", "12.00", "1.000"), ("| 8", "1 x 8", "18.00", "12.00", "1.500"),
                              ("| 64", "8 x 8", "74.00", "12.00", "6.167")], out)
            buckets = [float(r[5]) for r in rows]
            self.assertTrue(0 < buckets[0] < buckets[1] < buckets[2], buckets)
            self.assertEqual([r[7] for r in rows], ["200", "800", "6400"])  # RESULT's wall_ms
            # The replays asked the database for the program's launches (agent 0 runs it) and
            # found every one: the recording's garbage was other than the replay's.
            for r in rows:
                missed, _, launches = r[9].rstrip(" |").partition(" of ")
                self.assertEqual(missed, "0", out)
                self.assertGreaterEqual(int(launches), 40, out)
            # At the recording's size, the replay over the recording step by step (the stand-in's
            # probes all read alike: one state).
            self.assertIn("2 ranks, sim / passthrough by host state: pooled 1.000 (3/3), fast 1.000 (3/3), "
                          "slow - (0/0), mixed - (0/0)", out)
            self.assertRegex(out, r"  2 ranks: \d+ launches: exact row \d+, settled group \d+, work key \d+, "
                                  r"same kernel and shape \d+, fallback model 0 \(0 signatures missed\)")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
