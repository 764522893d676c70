"""Watches the job's status region (vgpu/status/status_region.h) while the command runs.

vgpu-run sets VGPU_STATUS_KEEP=1, so the region stays in /dev/shm after the job's last process
left, and the monitor reads the final figures from it and then removes it. Should the name
still go (a process of the job without that variable, or a vgpu-smi outside the job that found
only exited processes), the monitor also keeps a descriptor on the region from the moment it
appears; the data outlive the name. It then writes a copy under a name of its own
("<job>.final") and asks vgpu-smi about the copy, so every figure is vgpu-smi's.

Memory use is per live process and is cleared as each one leaves, so the peak is sampled
(vgpu-smi --query-gpu=memory.used every --sample-interval seconds): a peak shorter than the
interval can be missed."""
import glob
import os
import stat
import subprocess
import threading
import time

from .private_names import first_own

QUERY = ("index", "name", "memory.used", "memory.total", "vgpu.utilization", "vgpu.clock",
         "vgpu.busy", "vgpu.kernels")
_POLL_S = 0.02  # how often the region's name is looked for (a stat of a /dev/shm file)


def region_path(job):
    """The job's region as the driver names it (vgpu/status/status_region.cpp): the first of
    "vgpu-<uid>-<job>", "+1" .. "+7" that is absent or a private file of this user; a name
    someone else took (another user's file, a symlink, a file open to others) is skipped."""
    return first_own(f"/dev/shm/vgpu-{os.getuid()}-{job}", "+",
                     lambda st: stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077)


def parse_query(text):
    """vgpu-smi --query-gpu=QUERY --format=csv,noheader,nounits -> one dict per device."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        head, *numbers = line.rsplit(", ", len(QUERY) - 2)
        index, name = head.split(", ", 1)
        if len(numbers) != len(QUERY) - 2:
            continue
        used, total, util, clock, busy, kernels = numbers
        rows.append({"index": int(index), "name": name, "memory_used_mib": int(used),
                     "memory_total_mib": int(total), "utilization": int(util),
                     "clock_s": float(clock), "busy_s": float(busy), "kernels": int(kernels)})
    return rows


class Monitor:
    def __init__(self, job, vgpu_smi, env, sample_interval_s):
        self.job = job
        self.region = region_path(job)
        self._smi = vgpu_smi
        self._env = env
        self._interval = sample_interval_s
        self._fd = None
        self._identity = None
        self.incarnations = 0  # regions seen: more than one when processes ran one after another
        self.peak_mib = {}     # device index -> highest memory.used sampled
        self.errors = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vgpu-run-monitor", daemon=True)

    def start(self):
        self._thread.start()

    def _hold(self):
        """Keeps a descriptor on the region now under its name; True when there is one."""
        try:
            st = os.stat(self.region)
        except OSError:
            return False
        identity = (st.st_dev, st.st_ino)
        if identity == self._identity:
            return True
        try:
            fd = os.open(self.region, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return False
        st = os.fstat(fd)
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
            self._fd, self._identity = fd, (st.st_dev, st.st_ino)
            self.incarnations += 1
        return True

    def query(self, job):
        r = subprocess.run([self._smi, "--job", job, "--query-gpu=" + ",".join(QUERY),
                            "--format=csv,noheader,nounits"], env=self._env, capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError((r.stderr or r.stdout).strip() or f"vgpu-smi exit {r.returncode}")
        return parse_query(r.stdout)

    def _sample(self):
        try:
            rows = self.query(self.job)
        except (RuntimeError, OSError, subprocess.SubprocessError, ValueError):
            return  # the region went away between the stat and the read: nothing to sample
        with self._lock:
            for row in rows:
                i = row["index"]
                self.peak_mib[i] = max(self.peak_mib.get(i, 0), row["memory_used_mib"])

    def _run(self):
        next_sample = 0.0
        while not self._stop.is_set():
            if self._hold() and time.monotonic() >= next_sample:
                self._sample()
                next_sample = time.monotonic() + self._interval
            self._stop.wait(_POLL_S)

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def final(self):
        """The devices as vgpu-smi reports them now (still-attached processes) or as the last
        process left them; None when no process of the job ever attached."""
        self.stop()
        self._hold()
        try:
            if os.path.exists(self.region):
                rows = self.query(self.job)
                self._remove()
            elif self._fd is not None:
                rows = self._query_copy()
            else:
                return None
        except (RuntimeError, OSError, subprocess.SubprocessError, ValueError) as e:
            self.errors.append(f"cannot read the job's final state: {e}")
            return None
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        for row in rows:
            row["memory_peak_mib"] = max(self.peak_mib.get(row["index"], 0), row["memory_used_mib"])
        return rows

    def _remove(self):
        """Removes the region the job's processes left behind (VGPU_STATUS_KEEP). A process of
        the job still attached (a child the command left running) keeps its mapping; only the
        name goes. Its companions (the kernel durations the job's processes shared,
        status_region.h) go with it."""
        base = self.region.split("+", 1)[0]  # companions carry the name without a "+k"
        for path in [self.region] + glob.glob(glob.escape(base) + ".durations-gpu*"):
            try:
                os.unlink(path)
            except OSError:
                pass

    def _query_copy(self):
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size, 0)
        name = f"{self.job}.final"
        path = region_path(name)
        for attempt in range(2):
            try:
                out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
                break
            except FileExistsError:
                if attempt:
                    raise
                os.unlink(path)  # left by an earlier vgpu-run of the same job id that died
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view):]
        finally:
            os.close(out)
        try:
            return self.query(name)
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
