"""tests/gpu/fidelity/fit_collectives.py: fitted to the H200 curves and the runs pooled over
machines (tests/data/nccl_tests_h200x2_nvlink.txt, nccl_tests_h200x2_pooled_2026-11-27.txt), it
prints the figures the embedded cluster configuration carries for the H200
([collectives.H200-141GB.nvlink.ll] and .simple of simcore/cluster/default_cluster.toml), so the
default is what the tool says about its measurements; and pool_nccl_runs.py writes a pooled row
per run and size from 4 MiB, and refuses a log with no nccl-tests rows in one line."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ["VGPU_SOURCE_ROOT"]
FIDELITY = os.path.join(ROOT, "tests", "gpu", "fidelity")
CURVES = os.path.join(ROOT, "tests", "data", "nccl_tests_h200x2_nvlink.txt")
POOLED = os.path.join(ROOT, "tests", "data", "nccl_tests_h200x2_pooled_2026-11-27.txt")
DEFAULT = os.path.join(ROOT, "simcore", "cluster", "default_cluster.toml")


def tables(text, prefix):
    """{protocol: {collective: (latency, link_share, fill)}} of [<prefix>.ll] and .simple."""
    out = {}
    for proto in ("ll", "simple"):
        m = re.search(rf"^\[{re.escape(prefix)}\.{proto}\]\n((?:\w+ = .*\n)+)", text, re.M)
        if not m:
            return None
        rows = re.findall(r'^(\w+) = \{ latency = "([^"]+)", link_share = ([\d.]+), fill = "([^"]+)" \}', m.group(1),
                          re.M)
        out[proto] = {name: (lat, share, fill) for name, lat, share, fill in rows if name != "reduce"}
    return out


class FitCollectives(unittest.TestCase):
    def test_the_h200_default_is_the_fit_of_its_measurements(self):
        r = subprocess.run([sys.executable, os.path.join(FIDELITY, "fit_collectives.py"), CURVES, "H200-141GB",
                            "--pooled", POOLED], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        fitted = tables(r.stdout, "collectives.H200-141GB.nvlink")
        with open(DEFAULT) as f:
            default = tables(f.read(), "collectives.H200-141GB.nvlink")
        self.assertIsNotNone(fitted, r.stdout)
        self.assertEqual(len(fitted["simple"]), 6)
        self.assertEqual(fitted, default)

    def test_pooling_keeps_a_row_per_run_and_size_from_4_mib(self):
        log = ("# Collective test starting: reduce_scatter_perf\n"
               "     1048576        131072     float     sum      -1    15.74   66.62   33.31      0    15.80   66.36   33.18      0\n"
               "     4194304        524288     float     sum      -1    24.62  170.36   85.18      0    24.70  169.81   84.90      0\n"
               "    16777216       2097152     float     sum      -1    50.73  330.72  165.36      0    50.90  329.62  164.81      0\n")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rs.log")
            with open(path, "w") as f:
                f.write(log)
            empty = os.path.join(d, "empty.log")
            open(empty, "w").close()
            tool = os.path.join(FIDELITY, "pool_nccl_runs.py")
            r = subprocess.run([sys.executable, tool, "a header", "--", f"call9/rs={path}"], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual([l for l in r.stdout.splitlines() if not l.startswith("#")],
                             ["reduce_scatter 4194304 24.62 call9/rs", "reduce_scatter 16777216 50.73 call9/rs"])
            self.assertTrue(r.stdout.startswith("# a header\n"))
            r = subprocess.run([sys.executable, tool, "--", f"x={empty}"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertEqual(r.stderr.strip(), f"pool_nccl_runs.py: {empty}: no nccl-tests rows of a known collective")


if __name__ == "__main__":
    unittest.main()
