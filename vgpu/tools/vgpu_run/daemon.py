"""The job's vgpud and the private folder it shares with vgpu-run's files.

vgpu-run does not start vgpud itself: the NCCL plugin of the first rank that needs the shared
simulator starts it on demand (VGPU_SIMCORE=daemon, VGPU_VGPUD names the binary) under the job
id vgpu-run exports, so all ranks of the job meet on one socket and no daemon runs for jobs that
never use NCCL. At the end vgpu-run stops the job's daemon, if one was started, and removes its
files. The paths follow simcore/daemon/job_paths.h."""
import os
import re
import signal
import stat
import time

from .errors import UsageError
from .private_names import first_own


def socket_dir(env):
    if env.get("VGPU_DAEMON_DIR"):
        return env["VGPU_DAEMON_DIR"]
    if env.get("XDG_RUNTIME_DIR"):
        base = os.path.join(env["XDG_RUNTIME_DIR"], "vgpu")
    else:
        base = f"/tmp/vgpu-{os.getuid()}"
    # As simcore/daemon/job_paths.cpp: the first of "<base>", "<base>.1" ... ".7" that is absent
    # or a real directory of this user.
    return first_own(base, ".", lambda st: stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid())


def ensure_private_dir(path):
    """Creates the folder 0700 or checks it as vgpud does: a real directory of this user."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        raise UsageError(f"cannot create {path}: {e.strerror}: set VGPU_DAEMON_DIR to a folder of yours")
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise UsageError(f"{path} is not a directory owned by you: set VGPU_DAEMON_DIR to a folder "
                         "of yours")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def valid_job_id(job):
    """Ids that every part spells the same way: the status region, the plugin's segment names
    (which hash ids longer than 32 characters) and vgpud's file stem."""
    return bool(re.fullmatch(r"[A-Za-z0-9_-]{1,32}", job))


def _pid_is_vgpud(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0]
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return os.path.basename(argv0) == b"vgpud" and state != "Z"


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop(job, env, wait_s=5.0):
    """Stops the job's vgpud if one runs; removes its socket and lock. Returns a note for the
    summary (None when no daemon was started)."""
    base = os.path.join(socket_dir(env), job)
    lock, sock, log = base + ".lock", base + ".sock", base + ".log"
    if not os.path.exists(lock) and not os.path.exists(sock):
        return None
    note = "vgpud was started for the job"
    try:
        with open(lock) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pid = None
    if pid and _pid_is_vgpud(pid):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
        deadline = time.monotonic() + wait_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            note += f"; it did not stop in {wait_s:g} s and was killed"
        else:
            note += " and stopped"
    for path in (sock, lock):
        try:
            os.unlink(path)
        except OSError:
            pass
    try:
        if os.path.getsize(log) == 0:
            os.unlink(log)
        else:
            note += f"; its log: {log}"
    except OSError:
        pass
    return note
