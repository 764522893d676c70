"""tests/gpu/fidelity/fit_nccl_host.py: fitted to the loops measured on nvidia-h100-x2 (call 5 of
docs/device_calls/2026-11-27c, kept in tests/data/nccl_host_h200x2_2026-11-27.txt), it prints the
figures the embedded cluster configuration carries ([collectives.host] of
simcore/cluster/default_cluster.toml), so the default is what the tool says about its measurement;
a table missing a loop is one line and a failure."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ["VGPU_SOURCE_ROOT"]
TOOL = os.path.join(ROOT, "tests", "gpu", "fidelity", "fit_nccl_host.py")
DATA = os.path.join(ROOT, "tests", "data", "nccl_host_h200x2_2026-11-27.txt")
DEFAULT = os.path.join(ROOT, "simcore", "cluster", "default_cluster.toml")


def host_section(text):
    """The key = value lines of [collectives.host]."""
    m = re.search(r"^\[collectives\.host\]\n((?:\w+ = .*\n)+)", text, re.M)
    return dict(re.findall(r"^(\w+) = (.*)$", m.group(1), re.M)) if m else None


class FitNcclHost(unittest.TestCase):
    def test_the_default_is_the_fit_of_its_measurement(self):
        r = subprocess.run([sys.executable, TOOL, DATA], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        fitted = host_section(r.stdout)
        with open(DEFAULT) as f:
            default = host_section(f.read())
        self.assertIsNotNone(fitted, r.stdout)
        self.assertEqual(fitted, default)
        self.assertIn("# 10 of 12 loops within 10%", r.stdout)

    def test_a_missing_loop_is_one_line_and_a_failure(self):
        with open(DATA) as f:
            lines = [l for l in f if not l.startswith("sendrecv t2")]
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as t:
            t.writelines(lines)
        try:
            r = subprocess.run([sys.executable, TOOL, t.name], capture_output=True, text=True)
        finally:
            os.unlink(t.name)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.stderr.strip(), "fit_nccl_host: no loop for sendrecv t2")


if __name__ == "__main__":
    unittest.main()
