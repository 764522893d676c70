"""Every function the real 580-series libnvidia-ml.so.1 exports (the list recorded from
580.159.04 on an H100, tests/data/nvidia_smi_h100_580/nvml_exports.txt) is exported by vgpu's,
found through ctypes as pynvml finds it, and answers: with null/zero arguments after nvmlInit,
each returns an NVML status (NOT_SUPPORTED where vgpu does not implement it, an argument error
where it does) and none crashes. The calls run in a child process, so a crash fails the test
with the function's name rather than killing it.

Environment: VGPU_NVML (the built libnvidia-ml.so.1), VGPU_TEST_DATA (tests/data)."""
import ctypes
import os
import subprocess
import sys
import unittest

LIB = os.environ["VGPU_NVML"]
EXPORTS = os.path.join(os.environ["VGPU_TEST_DATA"], "nvidia_smi_h100_580", "nvml_exports.txt")
NOT_CALLED = {"nvmlInit", "nvmlInit_v2", "nvmlInitWithFlags", "nvmlShutdown", "nvmlErrorString"}
NOT_SUPPORTED = 3


def real_exports():
    with open(EXPORTS) as f:
        return [line.strip() for line in f if line.strip().startswith("nvml")]


def call_all(names):
    """In this process: nvmlInit, then each name with eight zero arguments; prints name=status."""
    lib = ctypes.CDLL(LIB)
    assert lib.nvmlInit_v2() == 0
    for name in names:
        fn = getattr(lib, name)
        fn.restype = ctypes.c_int
        print(f"{name}={fn(*([0] * 8))}", flush=True)
    lib.nvmlShutdown()


class NvmlExports(unittest.TestCase):
    def test_every_real_export_is_there(self):
        names = real_exports()
        self.assertGreater(len(names), 400)
        lib = ctypes.CDLL(LIB)
        missing = [n for n in names if not hasattr(lib, n)]
        self.assertEqual(missing, [])
        for must in ("nvmlDeviceGetPowerState", "nvmlDeviceGetApplicationsClock"):
            self.assertIn(must, names)

    def test_every_export_answers_without_crashing(self):
        names = [n for n in real_exports() if n not in NOT_CALLED]
        env = dict(os.environ, VGPU_JOB_ID=f"nvml-exports-{os.getpid()}")
        r = subprocess.run([sys.executable, __file__, "--call"] + names, capture_output=True, text=True,
                           env=env, timeout=120)
        answered = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
        crashed = next((n for n in names if n not in answered), None)
        self.assertEqual(r.returncode, 0, f"crashed in {crashed}: {r.stderr[-2000:]}")
        codes = {n: int(v) for n, v in answered.items()}
        bad = {n: c for n, c in codes.items() if not (0 <= c <= 30 or c == 999)}
        self.assertEqual(bad, {})
        # What pynvml users look at most is implemented, not a stub.
        for n in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetTemperature", "nvmlDeviceGetClockInfo",
                  "nvmlDeviceGetPowerState", "nvmlDeviceGetApplicationsClock", "nvmlDeviceGetEccMode",
                  "nvmlDeviceGetBAR1MemoryInfo", "nvmlDeviceGetSerial", "nvmlDeviceGetVbiosVersion",
                  "nvmlDeviceGetSamples", "nvmlDeviceGetTotalEnergyConsumption"):
            self.assertNotEqual(codes[n], NOT_SUPPORTED, n)
        supported = sum(1 for c in codes.values() if c != NOT_SUPPORTED)
        print(f"{len(codes)} functions called, {supported} implemented", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--call":
        call_all(sys.argv[2:])
        sys.exit(0)
    unittest.main(verbosity=2)
