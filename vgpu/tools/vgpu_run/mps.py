"""A private MPS daemon for the job (vgpu-run --mps; experimental, not yet measured on a GPU).

Why: ranks that are processes each hold their own context on the physical GPU, and CUDA
time-slices contexts: while one rank's NCCL kernel spins waiting for a peer whose context is not
running, every other rank waits for the slice to end. 8 ranks of DDP GPT-2 on one H200 took 2.1-2.7 s
of wall time a step for a step of 25-45 ms (2026-11-26). Under NVIDIA's Multi-Process Service the
ranks' contexts become clients of one server and their kernels run side by side.

The daemon is the job's own: its pipe and log folders are private to the user, inside vgpu-run's
folder, named after the job, and passed to the job through CUDA_MPS_PIPE_DIRECTORY and
CUDA_MPS_LOG_DIRECTORY (which select that daemon and no other); it is told to quit when the
command ends, whatever its exit status, and the folder is removed. The control program is
`nvidia-cuda-mps-control`, looked up on the job's PATH. The GPU's own settings (compute mode,
time slice) are left as they are."""
import os
import shutil
import subprocess

from .errors import UsageError

CONTROL = "nvidia-cuda-mps-control"
_WAIT_S = 10


def _control(env):
    found = shutil.which(CONTROL, path=env.get("PATH", os.defpath))
    if found is None:
        raise UsageError(f"--mps: {CONTROL} is not on PATH (it comes with the NVIDIA driver)")
    return found


class Daemon:
    """A started daemon: `vars` go to the job's environment; stop() ends it."""

    def __init__(self, control, folder, env):
        self.control, self.folder = control, folder
        self.vars = {"CUDA_MPS_PIPE_DIRECTORY": os.path.join(folder, "pipe"),
                     "CUDA_MPS_LOG_DIRECTORY": os.path.join(folder, "log")}
        self.env = dict(env)
        self.env.update(self.vars)

    def _control_call(self, args, stdin=None):
        """`control args` under the daemon's folders: None on success, else why not."""
        try:
            r = subprocess.run([self.control, *args], input=stdin, env=self.env, capture_output=True,
                               timeout=_WAIT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
        if r.returncode == 0:
            return None
        why = (r.stderr or r.stdout).decode(errors="replace").strip()
        return f"exited with status {r.returncode}{': ' + why if why else ''}"

    def stop(self):
        """Tells the daemon to quit and removes its folder. Returns a note for the summary."""
        why = self._control_call([], stdin=b"quit\n")
        if why is not None:
            return f"the job's MPS daemon did not take 'quit' ({why}): see {self.folder}"
        shutil.rmtree(self.folder, ignore_errors=True)
        return "the job's MPS daemon was started and stopped"


def start(job, private_folder, env):
    """Starts the job's daemon (`nvidia-cuda-mps-control -d`) under `private_folder`/mps-`job`."""
    daemon = Daemon(_control(env), os.path.join(private_folder, f"mps-{job}"), env)
    for path in daemon.vars.values():
        os.makedirs(path, mode=0o700, exist_ok=True)
    why = daemon._control_call(["-d"])
    if why is not None:
        shutil.rmtree(daemon.folder, ignore_errors=True)
        raise UsageError(f"--mps: {daemon.control} -d {why}")
    return daemon
