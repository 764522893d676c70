"""vgpu-clock-trace (vgpu/tools/vgpu-clock-trace) on a made-up VGPU_CLOCK_TRACE file: the dearest
stretch of CPU time comes first, named by the call that ended it and the one before, and stretches
between the same two calls are grouped with their median and what their slow ones add."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.environ["VGPU_SOURCE_ROOT"], "vgpu", "tools", "vgpu-clock-trace")


def move(wall, kind, charged, now, caller="", entry=""):
    return [wall, kind, charged, now, caller, entry]


class ClockTraceTool(unittest.TestCase):
    def run_tool(self, lines, *args):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            for line in lines:
                f.write(line + "\n")
        try:
            return subprocess.run([sys.executable, TOOL, *args, f.name], capture_output=True, text=True)
        finally:
            os.unlink(f.name)

    def test_the_slow_stretch_and_its_calls_are_named(self):
        moves = [move(0, "ready", 100.0, 100.0)]
        # Ten iterations: a profiler callback (a query from the plugin) 2 us after the previous
        # call, a launch 1 us after it; once, in the sixth, the callback comes 30 us late.
        for i in range(10):
            moves.append(move(10 + i * 10, "query", 30.0 if i == 5 else 2.0, 0, "libnccl-net-vgpu.so+0x10"))
            moves.append(move(12 + i * 10, "call", 1.0, 0, "libnccl.so.2+0x20", "libcuda.so.1+0x30"))
        t = {"pid": 7, "tid": 7, "name": "main", "dropped": 0, "moves": moves}
        other = {"pid": 7, "tid": 8, "name": "proxy", "dropped": 0, "moves": []}
        r = self.run_tool([json.dumps(t), json.dumps(other)], "--top", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn("thread 7 (main) of process 7: 21 moves", out)
        self.assertIn("thread 8 (proxy)", out)
        dearest = out.split("dearest stretches")[1].splitlines()[1].split()
        self.assertEqual(dearest[0], "#11")
        self.assertEqual(dearest[2:5], ["30.00", "query", "libnccl-net-vgpu.so+0x10"])
        self.assertEqual(dearest[5:], ["after", "libnccl.so.2+0x20", "->", "libcuda.so.1+0x30"])
        # The launch-to-callback stretches (9 after a launch, the first follows the ready): median
        # 2 us, max 30, 28 us above the median: listed first.
        first_pair = out.split("by time above their median")[1].splitlines()[1].split()
        self.assertEqual(first_pair[:4], ["9", "2.00", "30.00", "28.0"])
        self.assertEqual(first_pair[4:7], ["libnccl.so.2+0x20", "->", "libcuda.so.1+0x30"])
        self.assertIn("after (ready)", out)

    def test_a_stretch_after_a_wait_says_how_the_thread_waited(self):
        moves = [move(0, "sync", 50.0, 50.0) + [10, 3],
                 move(5, "call", 1.0, 51.0, "a.so+0x1", "libcuda.so.1+0x2") + [-1, -1],
                 move(900, "ready", 40.0, 91.0) + [14, 3],
                 move(960, "call", 60.0, 151.0, "a.so+0x1", "libcuda.so.1+0x2") + [-1, -1]]
        t = {"pid": 1, "tid": 1, "name": "m", "moves": moves}
        r = self.run_tool([json.dumps(t)], "--top", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        dearest = r.stdout.split("dearest stretches")[1].splitlines()[1]
        self.assertIn("60.00", dearest)
        self.assertIn("after (ready) (slept 4, preempted 0 times since the jump before)", dearest)

    def test_core_changes_and_lock_waits_are_reported(self):
        # [.., slept, preempted, cpu_us, core]: two cheap stretches on core 3, one dear one that
        # began on core 3 and ended on core 9 (the thread migrated), and two waits for a lock.
        moves = [move(0, "sync", 50.0, 50.0) + [10, 3, 100, 3],
                 move(5, "call", 1.0, 51.0, "a.so+0x1", "libcuda.so.1+0x2") + [-1, -1, -1, 3],
                 move(7, "call", 1.5, 52.5, "a.so+0x1", "libcuda.so.1+0x2") + [-1, -1, -1, 3],
                 move(40, "call", 30.0, 82.5, "a.so+0x1", "libcuda.so.1+0x2") + [-1, -1, -1, 9],
                 move(50, "wait", 300.0, 82.5, "libcuda.so.1+0x77") + [11, 3, 140, 9],
                 move(900, "wait", 500.0, 82.5, "libcuda.so.1+0x77") + [12, 3, 150, 9],
                 # 2,000 us of wall after the wait, 20 of them on the CPU: 1,980 off the core, asleep twice
                 move(2900, "read", 20.0, 102.5, "libcuda.so.1+0x78") + [14, 3, 170, 9]]
        t = {"pid": 1, "tid": 1, "name": "m", "moves": moves}
        r = self.run_tool([json.dumps(t)], "--top", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn("ran on 2 cores; 1 stretches changed core: median 30.00 us charged against 1.50 for the 3 that "
                      "did not", out)
        self.assertIn("[core 3 -> 9]", out.split("dearest stretches")[1].splitlines()[1])
        waits = out.split("waits for vgpu's locks")[1].splitlines()[1].split()
        self.assertEqual(waits, ["2", "800.0", "500.0", "libcuda.so.1+0x77"])
        self.assertIn("after 2 jumps and waits, off the core until the next move: median 1410.0 us, most 1980.0 us", out)
        longest = out.split("the longest (us off")[1].splitlines()[1].split()
        self.assertEqual(longest[:8], ["1980.0", "2000.0", "#6", "slept", "2,", "preempted", "0", "libcuda.so.1+0x78"])

    def test_only_the_thread_asked_for(self):
        t = {"pid": 1, "tid": 2, "name": "a", "moves": [move(0, "call", 1.0, 1.0)]}
        u = {"pid": 1, "tid": 3, "name": "b", "moves": [move(0, "call", 1.0, 1.0)]}
        r = self.run_tool([json.dumps(t), json.dumps(u)], "--tid", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("thread 2", r.stdout)
        self.assertIn("thread 3 (b)", r.stdout)

    def test_a_malformed_trace_is_one_line_and_a_failure(self):
        r = self.run_tool(["{not json"])
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, "")
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)
        self.assertIn("cannot read the trace", r.stderr)


if __name__ == "__main__":
    unittest.main()
