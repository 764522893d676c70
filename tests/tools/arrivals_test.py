"""tests/gpu/fidelity/arrivals.py on made-up timelines (no GPU): each all-reduce's arrivals, its end
after the last one and the kernels between, counted from each GPU's end; the sim backend's own
"nccl ..." steps and copies are not kernels.

Environment: VGPU_SOURCE_ROOT (the source tree)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ["VGPU_SOURCE_ROOT"]
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu", "fidelity"))
import arrivals  # noqa: E402

TOOL = os.path.join(ROOT, "tests", "gpu", "fidelity", "arrivals.py")


def timeline(compute_us, after_us, setup=False):
    """Two GPUs, three steps: GPU g's kernel of compute_us[g], then the all-reduce from its own end
    to after_us past the later one's; GPU 0 also a setup collective first when `setup`."""
    events, t = [], 0.0
    if setup:
        events.append({"name": "ncclDevKernel_Broadcast", "ph": "X", "pid": 0, "tid": 1, "ts": 0.0, "dur": 5.0})
        t = 10.0
    for _ in range(3):
        ends = [t + c for c in compute_us]
        end = max(ends) + after_us
        for g, c in enumerate(compute_us):
            events.append({"name": "gemm", "ph": "X", "pid": g, "tid": 0, "ts": t, "dur": c})
            events.append({"name": "memcpy HtoD 4 B", "ph": "X", "pid": g, "tid": 0, "ts": t, "dur": 50.0})
            events.append({"name": "nccl arrival", "ph": "X", "pid": g, "tid": 2, "ts": ends[g], "dur": 0.0})
            events.append({"name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ph": "X", "pid": g, "tid": 1,
                           "ts": ends[g], "dur": end - ends[g]})
        t = end
    return {"traceEvents": events}


class Arrivals(unittest.TestCase):
    def write(self, d, name, trace):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(trace, f)
        return path

    def test_spread_end_after_the_last_arrival_and_kernels_between(self):
        with tempfile.TemporaryDirectory() as d:
            a = self.write(d, "a.json", timeline([100.0, 300.0], 50.0, setup=True))
            s = arrivals.summarize(a, steps=1, total_steps=3)
        self.assertEqual(s["gpus"], 2)
        self.assertEqual(s["per_step"], 1)  # 4 and 3 collectives: counted from the end
        (row,) = s["rows"]
        self.assertAlmostEqual(row["last"] - row["first"], 200.0)
        self.assertAlmostEqual(row["end"] - row["last"], 50.0)
        self.assertAlmostEqual(row["compute_mean"], 200.0)  # the copies and "nccl arrival" left out
        self.assertAlmostEqual(row["compute_max"], 300.0)

    def test_two_timelines_side_by_side(self):
        with tempfile.TemporaryDirectory() as d:
            a = self.write(d, "a.json", timeline([100.0, 300.0], 50.0))
            b = self.write(d, "b.json", timeline([200.0, 200.0], 80.0))
            out = subprocess.run([sys.executable, TOOL, a, b, "--total-steps", "3"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        totals = [l for l in out.stdout.splitlines() if " totals: " in l]
        self.assertEqual(len(totals), 2, out.stdout)
        self.assertIn("A totals: spread 200.0 us, after last arrival 50.0 us, compute between 200.0 us", totals[0])
        self.assertIn("B totals: spread 0.0 us, after last arrival 80.0 us, compute between 200.0 us", totals[1])

    def test_the_sims_arrival_ops_are_the_arrivals(self):
        # As the sim writes it: every rank's kernel starts at the last arrival, after its own
        # "nccl arrival" op at its own time.
        trace = timeline([100.0, 300.0], 50.0)
        for e in trace["traceEvents"]:
            if e["name"].startswith("ncclDevKernel"):
                late = e["ts"] + e["dur"] - 50.0
                e["dur"], e["ts"] = 50.0, late
        with tempfile.TemporaryDirectory() as d:
            s = arrivals.summarize(self.write(d, "sim.json", trace), steps=1, total_steps=3)
        (row,) = s["rows"]
        self.assertAlmostEqual(row["last"] - row["first"], 200.0)
        self.assertAlmostEqual(row["end"] - row["last"], 50.0)


if __name__ == "__main__":
    unittest.main()
