"""tests/gpu/fidelity/kernel_compare.py on made-up timelines (no GPU): two vgpu timelines
compared kernel by kernel over the step before the last (steps start at the token sampler,
DistributionRandom), the kernel that reads long in one of them listed first.

Environment: VGPU_SOURCE_ROOT (the source tree)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ["VGPU_SOURCE_ROOT"]
TOOL = os.path.join(ROOT, "tests", "gpu", "fidelity", "kernel_compare.py")


def timeline(foreach_us, steps=4):
    """A step: the sampler (1 us), a GEMM (100 us), a foreach (`foreach_us`), then a copy."""
    events, t = [], 0.0
    for _ in range(steps):
        for name, dur in (("DistributionRandom_k", 1.0), ("gemm_k", 100.0), ("foreach_k", foreach_us),
                          ("copy host<->device 4 B", 2.0)):
            events.append({"name": name, "ph": "X", "pid": 0, "tid": 0, "ts": t, "dur": dur})
            t += dur
    return {"traceEvents": events}


class TwoTimelines(unittest.TestCase):
    def test_the_long_kernel_comes_first(self):
        with tempfile.TemporaryDirectory() as d:
            one, eight = os.path.join(d, "one.trace.json"), os.path.join(d, "eight.trace.json")
            for path, foreach_us in ((one, 3.0), (eight, 2000.0)):
                with open(path, "w") as f:
                    json.dump(timeline(foreach_us), f)
            out = subprocess.run([sys.executable, TOOL, one, eight], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        # real: 104 us of kernels in 3 launches (no copy); vgpu 2101 us in 3
        self.assertTrue(lines[0].startswith("kernels: real 0.10 ms in 3 launches, vgpu 2.10 ms in 3"), lines[0])
        first = lines[2].split()
        self.assertEqual(first[0], "1997.0")  # vgpu - real, us
        self.assertEqual(first[-1], "foreach_k")
        self.assertIn("matched kernels: 3; vgpu - real over them +2.00 ms", out.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
