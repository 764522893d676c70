"""tests/gpu/fidelity/host_states.py on made-up results (no GPU): each step's host state from
its ranks' probes, the two sides compared state by state and pooled, and the line the fidelity
table and sim_scale print.

Environment: VGPU_SOURCE_ROOT (the source tree)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ["VGPU_SOURCE_ROOT"]
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu", "fidelity"))
import host_states  # noqa: E402


def result(steps, *ranks_probes):
    return {"steps_ms": steps, "ranks_probe_ms": [list(p) for p in ranks_probes]}


class StepStates(unittest.TestCase):
    def test_every_rank_decides_the_state(self):
        # least 2.0: fast below 2.7, slow above 3.0, between is neither
        r = result([1, 2, 3, 4, 5], [2.0, 2.1, 3.5, 2.9, 3.1], [2.0, 3.6, 3.6, 2.0, 2.6])
        self.assertEqual(host_states.step_states(r, 2.0),
                         [(1.0, "fast"), (2.0, "mixed"), (3.0, "slow"), (4.0, "mixed"), (5.0, "mixed")])

    def test_warm_up_steps_before_the_probed_ones_are_left_out(self):
        r = result([9, 9, 1, 2], [2.0, 4.0])
        self.assertEqual(host_states.step_states(r, 2.0), [(1.0, "fast"), (2.0, "slow")])

    def test_a_probe_of_zero_tells_no_state(self):
        # (a zero least probe would divide by zero: the least positive one is taken)
        r = result([1, 2], [0.0, 2.0], [2.0, 2.0])
        self.assertEqual(host_states.least_probe([r]), 2.0)
        self.assertEqual(host_states.step_states(r, 2.0), [(1.0, "mixed"), (2.0, "fast")])
        self.assertEqual(host_states.step_states(r, 0.0), [])

    def test_a_result_without_probes_has_no_states(self):
        self.assertEqual(host_states.step_states({"steps_ms": [1.0]}, 2.0), [])


class Compare(unittest.TestCase):
    # Side a met three fast and three slow steps; side b one fast and five slow. State by state b
    # reads +1% (fast) and 0% (slow); pooled, b's extra slow steps make it read +5%.
    A = [result([40.0, 40.0, 40.0, 44.0, 44.0, 44.0], [2.0, 2.1, 2.0, 3.6, 3.7, 3.6])]
    B = [result([40.4, 44.0, 44.0], [2.0, 3.6, 3.6]), result([44.0, 44.0, 44.0], [3.7, 3.8, 3.6])]

    def test_state_by_state_and_pooled(self):
        cmp = host_states.compare(self.A, self.B)
        self.assertEqual(cmp["slow"][0], 3)
        self.assertEqual(cmp["slow"][2], 5)
        self.assertAlmostEqual(cmp["slow"][4], 1.0)
        self.assertEqual((cmp["fast"][0], cmp["fast"][2]), (3, 1))
        self.assertIsNone(cmp["fast"][4], "one step of b is too few to compare")
        self.assertEqual((cmp["pooled"][0], cmp["pooled"][2]), (6, 6))
        self.assertAlmostEqual(cmp["pooled"][4], 44.0 / 42.0)
        self.assertEqual(cmp["mixed"], (0, None, 0, None, None))

    def test_fewer_steps_needed_compares_the_fast_ones(self):
        cmp = host_states.compare(self.A, self.B, least_steps=1)
        self.assertAlmostEqual(cmp["fast"][4], 1.01)

    def test_the_line(self):
        line = host_states.describe(host_states.compare(self.A, self.B), "vgpu / real")
        self.assertEqual(line, "vgpu / real by host state: pooled 1.048 (6/6), fast - (3/1), slow 1.000 (3/5), "
                               "mixed - (0/0)")

    def test_matched_probe_bins(self):
        # Bins of 0.25 ms by the slowest rank's probe: a's steps at 2.0 (bin 8) and 3.6-3.7 (bins
        # 14-15); b's at 2.0 (1 step: too few), 3.6 (bin 14: 3 steps) and 3.7-3.8 (bins 15, 15).
        a = [result([40.0, 40.0, 40.0, 44.0, 44.0, 44.0, 44.0], [2.0, 2.0, 2.0, 3.6, 3.6, 3.6, 3.7])]
        b = [result([40.4, 44.0, 44.0, 44.0], [2.0, 3.6, 3.6, 3.6]), result([45.0, 45.0], [3.7, 3.8])]
        ratio, bins, na, nb = host_states.compare_bins(a, b)
        self.assertEqual((bins, na, nb), (1, 3, 3), "only the 3.6 ms bin has 3 steps on both sides")
        self.assertAlmostEqual(ratio, 1.0)
        ratio, bins, na, nb = host_states.compare_bins(a, b, least_steps=1)
        # bin 8: 40.4/40 (weight 1), bin 14: 1.0 (weight 3), bin 15: 45/44 (weight 1)
        self.assertEqual((bins, na, nb), (3, 7, 6))
        self.assertAlmostEqual(ratio, (1.01 + 3.0 + 45.0 / 44.0) / 5)
        # Several ranks: the slowest one's probe places the step.
        self.assertEqual(host_states.step_probes(result([1.0, 2.0], [2.0, 3.0], [2.5, 2.0])), [(1.0, 2.5), (2.0, 3.0)])
        self.assertEqual(host_states.describe_bins((None, 0, 0, 0), "vgpu / real"),
                         "vgpu / real at matched probes (0.25 ms bins): - over 0 bins (0/0)")

    def test_the_command_reads_logs_and_results_files(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = os.path.join(d, "a.log"), os.path.join(d, "b.jsonl")
            with open(a, "w") as f:
                f.write("noise\nRESULT " + json.dumps(self.A[0]) + "\n")
            with open(b, "w") as f:
                for r in self.B:
                    f.write(json.dumps(dict(r, kind="step")) + "\n")
            out = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu", "fidelity", "host_states.py"), a, b],
                                 capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, "B / A by host state: pooled 1.048 (6/6), fast - (3/1), slow 1.000 (3/5), "
                                     "mixed - (0/0)\nB / A at matched probes (0.25 ms bins): - over 0 bins (0/0)\n")


if __name__ == "__main__":
    unittest.main(verbosity=2)
