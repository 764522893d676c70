"""The virtual NVML of a cluster of more than 32 GPUs (nvml_library.h): NCCL refuses an NVML of
more than 32 devices, so a process that is a rank (VGPU_NODE_INDEX here; a current CUDA device
in a job) enumerates its virtual node's GPUs, indexed by their position in the node, while
lookups by PCI bus id find every GPU of the cluster and every NVLink of a GPU goes to one
NVSwitch (NCCL's fused topology of 64 ranks would otherwise overflow its 256 XML elements). A
process with no device sees the whole cluster; a cluster of 32 GPUs or fewer is unchanged.
Each case runs in a child process: the library's state is per process.

Environment: VGPU_NVML (the built libnvidia-ml.so.1)."""
import ctypes
import json
import os
import subprocess
import sys
import unittest

LIB = os.environ["VGPU_NVML"]


class PciInfo(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


def describe():
    """In this process: what NVML enumerates, and what a lookup of the cluster's last GPU gives."""
    lib = ctypes.CDLL(LIB)
    assert lib.nvmlInit_v2() == 0
    count = ctypes.c_uint()
    assert lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0
    out = {"count": count.value, "devices": []}
    for i in range(count.value):
        h = ctypes.c_void_p()
        assert lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) == 0
        pci, index = PciInfo(), ctypes.c_uint()
        assert lib.nvmlDeviceGetPciInfo_v3(h, ctypes.byref(pci)) == 0
        assert lib.nvmlDeviceGetIndex(h, ctypes.byref(index)) == 0
        switches = set()
        for link in range(18):
            remote = PciInfo()
            if lib.nvmlDeviceGetNvLinkRemotePciInfo_v2(h, link, ctypes.byref(remote)) == 0:
                switches.add(remote.busId.decode())
        uuid = ctypes.create_string_buffer(96)
        assert lib.nvmlDeviceGetUUID(h, uuid, 96) == 0
        out["devices"].append({"bus": pci.busId.decode(), "domain": pci.domain, "index": index.value,
                               "switches": sorted(switches), "uuid": uuid.value.decode()})
    # A GPU of another node, by bus id (NCCL asks for its peers'): LOOKUP.
    h, index = ctypes.c_void_p(), ctypes.c_uint()
    rc = lib.nvmlDeviceGetHandleByPciBusId_v2(os.environ.get("LOOKUP", "").encode(), ctypes.byref(h))
    out["lookup"] = rc
    if rc == 0:
        pci = PciInfo()
        lib.nvmlDeviceGetPciInfo_v3(h, ctypes.byref(pci))
        lib.nvmlDeviceGetIndex(h, ctypes.byref(index))
        out["lookup_domain"], out["lookup_index"] = pci.domain, index.value
    print(json.dumps(out))


def run(nodes, node_index=None, lookup="", visible=None):
    env = dict(os.environ, VGPU_NODES=str(nodes), VGPU_GPUS_PER_NODE="8", VGPU_CONFIG="", VGPU_DEVICE_COUNT="",
               VGPU_JOB_ID=f"nvml-large-{os.getpid()}", LOOKUP=lookup)
    env.pop("VGPU_NODE_INDEX", None)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    if node_index is not None:
        env["VGPU_NODE_INDEX"] = str(node_index)
    r = subprocess.run([sys.executable, __file__, "--describe"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


class LargeCluster(unittest.TestCase):
    def test_no_device_sees_the_whole_cluster(self):
        all64 = run(8)
        self.assertEqual(all64["count"], 64)
        self.assertEqual([d["index"] for d in all64["devices"]], list(range(64)))

    def test_a_rank_enumerates_its_node_and_finds_every_gpu(self):
        all64 = run(8)
        node7_first = all64["devices"][56]["bus"]
        rank = run(8, node_index=5, lookup=node7_first)
        self.assertEqual(rank["count"], 8)
        self.assertEqual([d["domain"] for d in rank["devices"]], [5] * 8)
        self.assertEqual([d["index"] for d in rank["devices"]], list(range(8)))
        self.assertEqual(rank["lookup"], 0)
        self.assertEqual((rank["lookup_domain"], rank["lookup_index"]), (7, 0))
        for d in rank["devices"]:
            self.assertEqual(len(d["switches"]), 1, d)

    def test_visible_devices_of_one_node_pick_that_node(self):
        # A process of one node's torchrun agent, before it has a current device (PyTorch counts
        # GPUs through NVML first): CUDA_VISIBLE_DEVICES names the node's GPUs, by ordinal or UUID.
        all64 = run(8)
        node3 = [d["uuid"] for d in all64["devices"][24:32]]
        for visible in (",".join(str(g) for g in range(24, 32)), ",".join(node3)):
            rank = run(8, visible=visible)
            self.assertEqual(rank["count"], 8, visible)
            self.assertEqual([d["uuid"] for d in rank["devices"]], node3)
            self.assertEqual([d["index"] for d in rank["devices"]], list(range(8)))
        # GPUs of two nodes: no one node, the whole cluster (as a process with no device).
        self.assertEqual(run(8, visible="7,8")["count"], 64)

    def test_small_cluster_unchanged(self):
        small = run(2, node_index=1)
        self.assertEqual(small["count"], 16)
        self.assertEqual([d["index"] for d in small["devices"]], list(range(16)))
        for d in small["devices"]:
            self.assertEqual(len(d["switches"]), 4, d)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--describe":
        describe()
    else:
        unittest.main()
