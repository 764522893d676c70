"""The cluster the job will see, asked of vgpu itself: the virtual NVML loads the configuration
with the driver's own code (VGPU_CONFIG and the VGPU_* overrides), so a configuration it
rejects is one the driver would reject, with the same message."""
import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import List

from .errors import UsageError

# Which vgpu-run option sets each variable, to name it in messages.
FLAG_OF = {
    "VGPU_CONFIG": "--config",
    "VGPU_NODES": "--nodes",
    "VGPU_GPUS_PER_NODE": "--gpus",
    "VGPU_GPU_MODEL": "--model",
    "VGPU_MEMORY": "--memory",
}

# Runs in a child python with the job's environment: nvmlInit there reads the same variables
# the job's processes will read. Prints one JSON line.
_PROBE = r"""
import ctypes, json, sys
nvml = ctypes.CDLL(sys.argv[1])
rc = nvml.nvmlInit_v2()
if rc != 0:
    print(json.dumps({"nvml_error": rc}))
    sys.exit(3)
class Pci(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint),
                ("bus", ctypes.c_uint), ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint),
                ("pciSubSystemId", ctypes.c_uint), ("busId", ctypes.c_char * 32)]
class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]
count = ctypes.c_uint()
nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
devices = []
for i in range(count.value):
    h = ctypes.c_void_p()
    if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) != 0:
        continue
    name = ctypes.create_string_buffer(96)
    nvml.nvmlDeviceGetName(h, name, 96)
    pci = Pci()
    nvml.nvmlDeviceGetPciInfo_v3(h, ctypes.byref(pci))
    mem = Memory()
    nvml.nvmlDeviceGetMemoryInfo(h, ctypes.byref(mem))
    devices.append({"index": i, "name": name.value.decode(), "domain": pci.domain,
                    "bus": pci.bus, "device": pci.device, "memory_total": mem.total})
nvml.nvmlShutdown()
print(json.dumps({"devices": devices}))
"""


@dataclass
class Device:
    index: int
    name: str
    domain: int  # one PCI domain per virtual node (vgpu/front/device/device.cpp)
    bus: int
    device: int
    memory_total: int

    @property
    def nccl_bus_id(self):  # as NCCL spells it in topology files
        return f"{self.domain:04x}:{self.bus:02x}:{self.device:02x}.0"


@dataclass
class Cluster:
    devices: List[Device]
    nodes: int
    gpus_per_node: int
    nic_per_node: int
    nic_bits_per_s: float
    node_of: List[int] = field(default_factory=list)   # per device
    local_of: List[int] = field(default_factory=list)  # per device: index within its node

    @property
    def model(self):
        names = sorted({d.name for d in self.devices})
        return ", ".join(names)


def _one_line_reason(stderr):
    """The driver's own words from the NVML's stderr, without its prefix."""
    for line in stderr.splitlines():
        m = re.search(r"cluster configuration rejected: (.*)", line)
        if m:
            return m.group(1).strip()
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    return lines[-1] if lines else "unknown error"


def _what_to_change(reason):
    for var, flag in FLAG_OF.items():
        if reason.startswith(f"environment: {var}") or f" {var}=" in reason:
            return f"change {flag} (or {var})"
    if reason.startswith("environment:"):
        return "change --nodes/--gpus or the VGPU_* variables"
    if reason.endswith(("no such file", "not a regular file", "cannot read the file")):
        return "change --config (or VGPU_CONFIG)"
    return "fix the file (--config / VGPU_CONFIG)"


def probe(nvml_libdir, env, timeout_s=60):
    """The devices the job will see, or UsageError with the driver's reason."""
    lib = os.path.join(nvml_libdir, "libnvidia-ml.so.1")
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE, lib], env=env, capture_output=True,
                           text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise UsageError(f"the virtual NVML ({lib}) did not answer in {timeout_s} s")
    if r.returncode == 3:
        reason = _one_line_reason(r.stderr)
        raise UsageError(f"cluster configuration rejected: {reason}: {_what_to_change(reason)}")
    try:
        devices = [Device(**d) for d in json.loads(r.stdout.strip().splitlines()[-1])["devices"]]
    except (ValueError, IndexError, KeyError, TypeError):
        raise UsageError(f"cannot read the virtual devices through {lib}: "
                         f"{_one_line_reason(r.stderr or r.stdout)}")
    if not devices:
        raise UsageError(f"the virtual NVML ({lib}) shows no devices: check --config/--nodes/--gpus")
    return devices


def parse_bits_per_s(text):
    """'400Gb/s', '400 Gbps', '50GB/s' -> bits per second; None if not understood."""
    if isinstance(text, (int, float)):
        return float(text) * 8  # a plain number in the TOML is bytes per second
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kKMGT]?)(b|B)(?:/s|ps)\s*", str(text))
    if not m:
        return None
    scale = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m.group(2)]
    value = float(m.group(1)) * scale
    return value if m.group(3) == "b" else value * 8


def _nic_settings(env):
    """[nic] per_node and bandwidth from VGPU_CONFIG; None where the file leaves them out (the
    driver then uses one NIC per GPU and the embedded default's 400 Gb/s)."""
    path = env.get("VGPU_CONFIG")
    if not path:
        return None, None
    try:
        import tomllib
        with open(path, "rb") as f:
            nic = tomllib.load(f).get("nic", {})
    except Exception:  # the driver accepted it; whatever we cannot read keeps its default
        return None, None
    per_node = nic.get("per_node")
    bw = parse_bits_per_s(nic["bandwidth"]) if "bandwidth" in nic else None
    return (per_node if isinstance(per_node, int) and per_node > 0 else None), bw


def describe(nvml_libdir, env):
    devices = probe(nvml_libdir, env)
    domains = sorted({d.domain for d in devices})
    node_index = {dom: i for i, dom in enumerate(domains)}
    seen = {}
    node_of, local_of = [], []
    for d in devices:
        n = node_index[d.domain]
        node_of.append(n)
        local_of.append(seen.get(n, 0))
        seen[n] = seen.get(n, 0) + 1
    gpus_per_node = max(seen.values())
    nic_per_node, nic_bw = _nic_settings(env)
    return Cluster(devices, len(domains), gpus_per_node, nic_per_node or gpus_per_node,
                   nic_bw if nic_bw and math.isfinite(nic_bw) else 400e9, node_of, local_of)
