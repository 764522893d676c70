"""tests/gpu/fidelity/table.py on made-up results (no GPU): the 8-GPU predictions (the order
statistics of the ranks' host times, and the prediction line built from them), and the
nccl-tests rows over several rounds (medians, the real rounds' range).

Environment: VGPU_SOURCE_ROOT (the source tree)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ["VGPU_SOURCE_ROOT"]
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu", "fidelity"))
import table  # noqa: E402

SHAPE = "--batch 4 --seq 1024 --steps 6 --warmup 3"


class ExpectedMax(unittest.TestCase):
    def test_one_draw_is_the_mean(self):
        self.assertAlmostEqual(table.expected_max([1.0, 2.0, 6.0], 1), 3.0)

    def test_two_draws_of_two_values(self):
        # max(a, b) is 1 only when both are 1: 1/4 * 1 + 3/4 * 2
        self.assertAlmostEqual(table.expected_max([2.0, 1.0], 2), 1.75)

    def test_more_draws_reach_the_largest(self):
        xs = [10.0, 11.0, 12.0, 20.0]
        self.assertLess(table.expected_max(xs, 2), table.expected_max(xs, 8))
        self.assertLess(table.expected_max(xs, 8), 20.0)
        self.assertAlmostEqual(table.expected_max(xs, 400), 20.0, places=6)

    def test_mean_step_max_takes_each_steps_slowest_rank(self):
        self.assertAlmostEqual(table.mean_step_max([[1.0, 5.0], [3.0, 2.0]]), 4.0)


def run_table(rows):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "results.jsonl")
        with open(path, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        out = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu", "fidelity", "table.py"), path,
                              "H200-141GB"], capture_output=True, text=True)
    return out.returncode, out.stdout


def nccl_row(side, size, busbw, run):
    return {"kind": "nccl", "op": "all_reduce", "side": side, "size": str(size), "busbw": str(busbw),
            "time_us": "1", "run": str(run)}


class NcclRounds(unittest.TestCase):
    def test_one_round_compares_the_two_figures(self):
        rc, out = run_table([nccl_row("real", 65536, 4.0, 1), nccl_row("vgpu", 65536, 4.4, 1)])
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"all_reduce +64K +4\.00 +4\.40 +\+10\.0%  ok \(±15%\)\n")
        self.assertIn("nccl-tests: 1 of 1 sizes within target\n", out)
        self.assertNotIn("range", out)

    def test_rounds_compare_medians_and_show_the_real_range(self):
        # Real 2.0 / 4.0 / 3.0 (median 3.0), vgpu 3.9 / 3.3 / 9.0 (median 3.9: +30%, inside 2.0-4.0);
        # 256K: real 10 / 11 / 12, vgpu 20 / 20 / 20: outside.
        rows = []
        for run, (r, v) in enumerate(((2.0, 3.9), (4.0, 3.3), (3.0, 9.0)), 1):
            rows += [nccl_row("real", 65536, r, run), nccl_row("vgpu", 65536, v, run)]
        for run, r in enumerate((10.0, 11.0, 12.0), 1):
            rows += [nccl_row("real", 262144, r, run), nccl_row("vgpu", 262144, 20.0, run)]
        rc, out = run_table(rows)
        self.assertEqual(rc, 0, out)
        self.assertIn("medians of 3 rounds", out)
        self.assertRegex(out, r"all_reduce +64K +3\.00 +3\.90 +\+30\.0%  MISSED \(±15%\)  2\.00-4\.00 \(100%\) inside\n")
        self.assertRegex(out, r"all_reduce +256K +11\.00 +20\.00 .* 10\.00-12\.00 \(20%\) outside\n")
        self.assertIn("nccl-tests: 0 of 2 sizes within target; vgpu inside the real rounds' range in 1\n", out)


class StepRows(unittest.TestCase):
    def test_steps_compared_at_the_same_host_state(self):
        # The real run met the fast state (2.0 ms probes), vgpu's two runs mostly the slow one:
        # the means differ by 9%, the slow steps not at all.
        rows = [
            {"kind": "step", "side": "real", "mode": "single", "world": 1, "args": "", "step_ms": 40.0,
             "steps_ms": [40.0, 40.0, 40.0, 44.0, 44.0, 44.0], "ranks_probe_ms": [[2.0, 2.0, 2.1, 3.6, 3.7, 3.6]]},
            {"kind": "step", "side": "vgpu", "mode": "single", "world": 1, "args": "", "step_ms": 44.0, "backward_ms": 20.0,
             "steps_ms": [44.0, 44.0, 44.0], "ranks_probe_ms": [[3.6, 3.7, 3.8]]},
            {"kind": "step", "side": "vgpu", "mode": "single", "world": 1, "args": "", "step_ms": 44.0, "backward_ms": 20.0,
             "steps_ms": [40.0, 44.0, 44.0], "ranks_probe_ms": [[2.0, 3.6, 3.6]]},
        ]
        with tempfile.TemporaryDirectory() as d:
            res = os.path.join(d, "results.jsonl")
            with open(res, "w") as f:
                f.write("\n".join(json.dumps(r) for r in rows) + "\n")
            out = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu", "fidelity", "table.py"),
                                  res, "H200-141GB"], capture_output=True, text=True, check=True).stdout
        self.assertRegex(out, r"single x1 +40\.00 +44\.00 / 44\.00 +\+10\.0%")
        self.assertIn("  vgpu / real by host state: pooled 1.048 (6/6), fast - (3/1), slow 1.000 (3/5), "
                      "mixed - (0/0)\n", out)
        # Then by matched probes (host_states.compare_bins): no 0.25 ms bin holds 3 steps of each
        # side here (3.6: 2 and 2, 3.7-3.8: 1 and 2).
        self.assertIn("  vgpu / real at matched probes (0.25 ms bins): - over 0 bins (0/0)\n", out)


class EightGpuRow(unittest.TestCase):
    def test_the_order_statistics_prediction(self):
        with tempfile.TemporaryDirectory() as d:
            collective = os.path.join(d, "vgpu-collective")
            with open(collective, "w") as f:  # every all-reduce: 1 ms on 8 ranks, 0.5 on 2
                f.write('#!/bin/sh\n[ "$3" = 8 ] && echo "all_reduce: 1000 us" || echo "all_reduce: 500 us"\n')
            os.chmod(collective, 0o755)
            rows = [
                {"kind": "step", "side": "vgpu", "mode": "ddp", "world": 8, "args": SHAPE, "step_ms": 40.0,
                 "backward_ms": 20.0, "ranks_steps_fb_ms": [[30.0, 31.0]] * 8},
                {"kind": "step", "side": "vgpu", "mode": "single", "world": 1, "args": SHAPE, "step_ms": 25.0,
                 "backward_ms": 20.0},
                {"kind": "step", "side": "real", "mode": "ddp", "world": 2, "args": SHAPE, "step_ms": 30.0,
                 "backward_ms": 18.0, "ranks_steps_fb_ms": [[20.0, 22.0], [24.0, 26.0]]},
                {"kind": "step", "side": "vgpu", "mode": "ddp", "world": 2, "args": SHAPE, "step_ms": 29.0,
                 "backward_ms": 18.0, "ranks_steps_fb_ms": [[21.0, 23.0], [25.0, 27.0]]},
            ]
            res = os.path.join(d, "results.jsonl")
            with open(res, "w") as f:
                f.write("\n".join(json.dumps(r) for r in rows) + "\n")
            out = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu", "fidelity", "table.py"),
                                  res, "H200-141GB", collective], capture_output=True, text=True, check=True).stdout
        pool = [20.0, 22.0, 24.0, 26.0]
        e8, e2 = table.expected_max(pool, 8), table.expected_max(pool, 2)
        # the real 2-GPU step plus the model's difference (0.5 ms of the last bucket on 2 ranks, 1 on 8)
        p2 = 30.0 + 1.0 - 0.5
        line = [l for l in out.splitlines() if "slowest of 8 hosts" in l]
        self.assertEqual(len(line), 1, out)
        self.assertIn(f"predicted {p2 + e8 - e2:.2f} ms", line[0])
        self.assertIn("4 rank-steps", line[0])
        self.assertIn("vgpu 8-GPU: the slowest rank's host time until backward() returned, mean over steps: 30.50 ms", out)
        # vgpu's own 2-rank run: its slowest rank per step (25, 27), and its hosts ordered as 8
        self.assertIn("vgpu 2-GPU: the slowest rank's host time until backward() returned, mean over steps: 26.00 ms", out)
        own = [21.0, 23.0, 25.0, 27.0]
        self.assertIn(f"vgpu's 2-rank hosts (4 rank-steps): expected slowest of 8 {table.expected_max(own, 8):.2f} ms, "
                      f"of 2 {table.expected_max(own, 2):.2f}", out)
        # the real side's prediction still comes from the real runs only
        self.assertIn(f"predicted {p2 + e8 - e2:.2f} ms", line[0])


if __name__ == "__main__":
    unittest.main()
