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


class SmiViews(unittest.TestCase):
    def real(self, name):
        with open(os.path.join(DATA, name)) as f:
            return f.read()

    def test_full_report_of_an_idle_h100_is_the_real_ones(self):
        # Lines that name that GPU, that machine or that moment.
        per_device = ("Timestamp", "Attached GPUs", "GPU 0000", "Serial Number", "GPU UUID", "GPU PDI",
                      "Board ID", "Module Id", "Bus ", "Device  ", "Bus Id", "Tx Throughput", "Rx Throughput",
                      "Average Power Draw", "Instantaneous Power Draw")
        r = smi("-q", "-i", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        real = self.real("smi_q.txt").splitlines()
        ours = r.stdout.splitlines()
        self.assertEqual(len(ours), len(real))
        differ = [(a, b) for a, b in zip(real, ours)
                  if a.rstrip() != b.rstrip() and not a.strip().startswith(per_device)]
        self.assertEqual(differ, [])

    def test_table_has_nvidia_smis_layout(self):
        r = smi("-i", "0,1")
        self.assertEqual(r.returncode, 0, r.stderr)
        ours = r.stdout.splitlines()[1:24]
        real = self.real("smi_table.txt").splitlines()[1:24]
        self.assertEqual([len(l.rstrip()) for l in ours], [len(l.rstrip()) for l in real])
        # The same text but for the brand, bus ids and the idle GPU's sensors.
        def norm(line):
            line = re.sub(r"(NVIDIA|VGPU)-SMI 580\.159\.04 +", "SMI ", line)
            line = re.sub(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.0", "BUS", line)
            return re.sub(r"\d+C +P0 +\d+W", "T P0 W", line)
        self.assertEqual([norm(l) for l in ours], [norm(l) for l in real])

    def test_topology_matrix(self):
        r = smi("topo", "-m")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        real = self.real("smi_topo.txt").splitlines()
        self.assertTrue(lines[0].startswith("\t\x1b[4mGPU0\tGPU1\tGPU2"))
        self.assertTrue(lines[0].endswith("CPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m"))
        for i in range(8):
            cells = lines[1 + i].split("\t")
            self.assertEqual(cells[0], f"GPU{i}")
            self.assertEqual(cells[1:9], [" X " if j == i else "NV18" for j in range(8)])
            self.assertEqual(cells[-3:], ["0", "", "N/A"])
        self.assertEqual(lines[9:], real[3:])  # the legend, verbatim
        # Two virtual nodes: GPUs of different nodes are SYS apart; without NVLink, NODE.
        env = dict(ENV, VGPU_NODES="2", VGPU_GPUS_PER_NODE="2")
        two = subprocess.run([SMI, "--cluster", "topo", "-m"], capture_output=True, text=True, env=env)
        self.assertEqual([l.split("\t")[1:5] for l in two.stdout.splitlines()[1:5]],
                         [[" X ", "NV18", "SYS", "SYS"], ["NV18", " X ", "SYS", "SYS"],
                          ["SYS", "SYS", " X ", "NV18"], ["SYS", "SYS", "NV18", " X "]])

    def test_nvlink_status(self):
        r = smi("nvlink", "-s", "-i", "0")
        self.assertEqual(r.returncode, 0, r.stderr)
        ours, real = r.stdout.splitlines(), self.real("smi_nvlink.txt").splitlines()
        self.assertEqual(len(ours), len(real))
        self.assertEqual(ours[1:], real[1:])  # 18 links at NVLink 4's 26.562 GB/s

    def test_dmon(self):
        r = smi("dmon", "-c", "2", "-d", "1", "-i", "0,1")
        self.assertEqual(r.returncode, 0, r.stderr)
        ours, real = r.stdout.splitlines(), self.real("smi_dmon.txt").splitlines()
        self.assertEqual(ours[:2], real[:2])
        self.assertEqual(len(ours), 6)  # one header, two samples of two GPUs
        for row in ours[2:]:
            self.assertEqual(len(row), len(real[2]))
            self.assertEqual(row.split()[-2:], ["2619", "345"])  # idle: memory clock, idle SM clock


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=2) and 0)
