"""tests/gpu/fidelity/fit_nccl_host.py: fitted to the loops measured on three hosts of nvidia-h100-x2
(call 5 of docs/device_calls/2026-11-27c, calls 1 and 3 of 2026-11-27h, kept in
tests/data/nccl_host_h200x2_2026-11-27*.txt), it prints the figures the embedded cluster
configuration carries ([collectives.host] of simcore/cluster/default_cluster.toml), so the default
is what the tool says about its measurement; each loop's figure is the median over the hosts of
each host's median; a table missing a loop is one line and a failure."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ["VGPU_SOURCE_ROOT"]
TOOL = os.path.join(ROOT, "tests", "gpu", "fidelity", "fit_nccl_host.py")
DATA = os.path.join(ROOT, "tests", "data", "nccl_host_h200x2_2026-11-27.txt")
HOSTS = [DATA] + [os.path.join(ROOT, "tests", "data", f"nccl_host_h200x2_2026-11-27h-call{n}.txt") for n in (1, 3)]
DEFAULT = os.path.join(ROOT, "simcore", "cluster", "default_cluster.toml")


def host_section(text):
    """The key = value lines of [collectives.host]."""
    m = re.search(r"^\[collectives\.host\]\n((?:\w+ = .*\n)+)", text, re.M)
    return dict(re.findall(r"^(\w+) = (.*)$", m.group(1), re.M)) if m else None


class FitNcclHost(unittest.TestCase):
    def test_the_default_is_the_fit_of_its_measurement(self):
        r = subprocess.run([sys.executable, TOOL] + HOSTS, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        fitted = host_section(r.stdout)
        with open(DEFAULT) as f:
            default = host_section(f.read())
        self.assertIsNotNone(fitted, r.stdout)
        self.assertEqual(fitted, default)
        self.assertIn("# 10 of 12 loops within 10%", r.stdout)

    def test_each_loop_is_the_median_over_the_hosts(self):
        r = subprocess.run([sys.executable, TOOL] + HOSTS, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        loops = re.findall(r"^# (\w+) +(g2|t2): measured +([\d.]+) us.*; hosts ([\d./ ]+)$", r.stdout, re.M)
        self.assertEqual(len(loops), 12, r.stdout)
        for op, layout, measured, hosts in loops:
            each = sorted(float(x) for x in hosts.split(" / "))
            self.assertEqual(len(each), 3, (op, layout))
            self.assertAlmostEqual(float(measured), each[1], places=2, msg=(op, layout))
        # One host alone is that host's fit (the first host's: the figures it had before).
        one = subprocess.run([sys.executable, TOOL, DATA], capture_output=True, text=True)
        self.assertEqual(host_section(one.stdout), {"group": '"0.5us"', "communicator": '"4.5us"',
                                                    "all_reduce_communicator": '"6.75us"', "operation": '"0.3us"'})

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
