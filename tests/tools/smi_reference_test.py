"""vgpu-smi against nvidia-smi 580 on a real H100 80GB HBM3 (tests/data/nvidia_smi_h100_580/,
recorded on the device machine): every field of --help-query-gpu is known, the header of a query
of every field is nvidia-smi's (names and units), and an idle virtual H100 answers every field
as the real idle one did, except what differs from device to device or moment to moment.

Environment: VGPU_SMI (the built vgpu-smi), VGPU_TEST_DATA (tests/data)."""
import os
import re
import subprocess
import sys
import unittest

SMI = os.environ["VGPU_SMI"]
DATA = os.path.join(os.environ["VGPU_TEST_DATA"], "nvidia_smi_h100_580")
# The embedded default cluster (1 x 8 H100): no user configuration may leak in.
ENV = dict(os.environ, VGPU_CONFIG="", VGPU_DEVICE_COUNT="", VGPU_GPU_MODEL="", VGPU_MEMORY="")

# Fields whose real value belongs to that GPU, that machine or that moment.
PER_DEVICE = {"timestamp", "count", "serial", "uuid", "pci.bus_id", "pci.bus", "pci.device",
              "temperature.gpu", "temperature.gpu.tlimit", "temperature.memory",
              "power.draw.instant", "platform.module_id", "platform.host_id"}


def smi(*args):
    return subprocess.run([SMI, "--cluster", *args], capture_output=True, text=True, env=ENV)


def help_fields():
    names = []
    with open(os.path.join(DATA, "smi_help_query_gpu.txt")) as f:
        for line in f:
            if line.startswith('"'):
                names += re.findall(r'"([^"]+)"', line)
    return [n for n in names if not re.match(r"^\d+: ", n)]  # compute-mode value lines


class SmiReference(unittest.TestCase):
    def setUp(self):
        with open(os.path.join(DATA, "smi_query_all.csv")) as f:
            lines = f.read().splitlines()
        self.header = lines[0].split(", ")
        self.row = lines[1].split(", ")
        self.names = [re.sub(r" \[.*\]$", "", h) for h in self.header]

    def test_every_help_field_is_known(self):
        fields = help_fields()
        self.assertGreater(len(fields), 200)
        unknown = [n for n in fields if smi("--query-gpu=" + n, "--format=csv", "-i", "0").returncode != 0]
        self.assertEqual(unknown, [])

    def test_one_query_of_every_field_has_nvidia_smis_header(self):
        r = smi("--query-gpu=" + ",".join(self.names), "--format=csv", "-i", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[0].split(", "), self.header)

    def test_an_idle_h100_answers_as_the_real_one(self):
        r = smi("--query-gpu=" + ",".join(self.names), "--format=csv,noheader", "-i", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        ours = r.stdout.splitlines()[0].split(", ")
        self.assertEqual(len(ours), len(self.row))
        differ = [(n, real, mine) for n, real, mine in zip(self.names, self.row, ours)
                  if n not in PER_DEVICE and real != mine]
        self.assertEqual(differ, [])

    def test_memory_total_is_nvmls_not_cudas(self):
        r = smi("--query-gpu=memory.total,memory.reserved,memory.free", "--format=csv,noheader,nounits")
        for line in r.stdout.splitlines():
            self.assertEqual(line, "81559, 480, 81079")  # free = CUDA's totalGlobalMem

    def test_unknown_field_fails_known_unanswerable_field_is_na(self):
        self.assertEqual(smi("--query-gpu=index,no.such.field", "--format=csv").returncode, 2)
        r = smi("--query-gpu=index,fan.speed,hostname", "--format=csv,noheader", "-i", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "1, [N/A], [N/A]")

    def test_systeminformation_query(self):
        # What the systeminformation npm library sends.
        q = ("driver_version,pci.sub_device_id,name,pci.bus_id,fan.speed,memory.total,memory.used,"
             "memory.free,utilization.gpu,utilization.memory,temperature.gpu,temperature.memory,"
             "power.draw,power.limit,clocks.gr,clocks.mem")
        r = smi("--query-gpu=" + q, "--format=csv,noheader,nounits")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.splitlines()), 8)
        self.assertEqual(len(r.stdout.splitlines()[0].split(", ")), 16)


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=2) and 0)
