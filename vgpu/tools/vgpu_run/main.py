"""vgpu-run: set up, run the command, summarize. See vgpu/tools/vgpu-run and environment.py."""
import hashlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time

from . import cluster as cluster_mod
from . import daemon, environment, kernel_db, launch_stats, layout as layout_mod, mps, options as options_mod, summary, topology
from .errors import UsageError
from .monitor import Monitor, region_path

# Signals vgpu-run passes on to the command. SIGINT is not among them: a terminal's Ctrl-C
# already reaches the command (same process group), and a second copy would hurry torchrun.
_FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def _say(message):
    print(f"vgpu-run: {message}", file=sys.stderr, flush=True)


def _job_id(options, base, notes):
    job = options.job_id or base.get("VGPU_JOB_ID") or f"run-{os.getpid()}-{secrets.token_hex(3)}"
    if not daemon.valid_job_id(job):
        source = "--job-id" if options.job_id else "VGPU_JOB_ID"
        raise UsageError(f"{source} {job!r}: use 1 to 32 letters, digits, '-' or '_'")
    if os.path.exists(region_path(job)):
        notes.append(f"job {job} is already running: this command joins it (same devices)")
    return job


def _write_topology(cluster, env, notes):
    text, left_out = topology.make_xml(cluster)
    if left_out:
        notes.append(f"the NCCL topology file holds {len(cluster.devices) - left_out} of "
                     f"{len(cluster.devices)} GPUs (NCCL reads at most 256 elements); NCCL "
                     "places the others itself")
    folder = daemon.ensure_private_dir(daemon.socket_dir(env))
    # Named by content: the same cluster reuses one file, and the path --print-env shows stays
    # valid after vgpu-run has exited.
    path = os.path.join(folder, f"nccl-topo-{hashlib.sha1(text.encode()).hexdigest()[:12]}.xml")
    if not os.path.isfile(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def prepare(options, configured, base):
    """(the variables to set, the cluster, the backend, notes), or UsageError."""
    if not options.command and not options.print_env:
        raise UsageError(f"no command given: {options_mod.USAGE}")
    notes = []
    layout = layout_mod.resolve(options, configured)
    backend, real = layout_mod.choose_backend(options.backend, base, layout)
    if options.backend == "auto" and backend == "sim" and base.get("VGPU_REAL_LIBCUDA") \
            and not os.path.isfile(base["VGPU_REAL_LIBCUDA"]):
        notes.append(f"VGPU_REAL_LIBCUDA={base['VGPU_REAL_LIBCUDA']} does not exist: "
                     "sim backend")
    # The virtual clock is the default: used when the shim is there, required when asked for.
    if options.virtual_clock is None:
        options.virtual_clock = bool(layout.vclock_lib and os.path.isfile(layout.vclock_lib))
        if not options.virtual_clock:
            notes.append("the clock shim (libvgpu-vclock.so) is not there: the job's own clocks "
                         "stay real (only its CUDA events report virtual time)")
    layout_mod.require(layout, backend, options.virtual_clock)
    kernel_db.check(options, backend)
    job = _job_id(options, base, notes)
    probe_env = dict(base)
    probe_env.update(environment.cluster_vars(options))
    probe_env["VGPU_JOB_ID"] = job
    cluster = cluster_mod.describe(layout.nvml_libdir, probe_env)
    notes += kernel_db.record_notes(options, backend, len(cluster.devices))
    topo = _write_topology(cluster, base, notes)
    setting = environment.job_vars(options, layout, backend, real, job, topo, base)
    setting.update(kernel_db.job_vars(options, daemon.ensure_private_dir(daemon.socket_dir(base)), job))
    setting.update(launch_stats.job_vars(backend, daemon.ensure_private_dir(daemon.socket_dir(base)), job, base))
    notes += environment.replaced(setting, base)
    return setting, cluster, backend, layout, notes


def _run(command, env):
    """The command's exit status, 128+N when signal N ended it."""
    try:
        child = subprocess.Popen(command, env=env)
    except FileNotFoundError:
        _say(f"{command[0]}: command not found")
        return 127
    except PermissionError:
        _say(f"{command[0]}: permission denied")
        return 126
    except OSError as e:
        _say(f"{command[0]}: {e.strerror}")
        return 126

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous = {s: signal.signal(s, forward) for s in _FORWARDED}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 - status if status < 0 else status


def _remove_nccl_table(job_id):
    """The sim backend's table where the job's NCCL ranks in different processes meet
    (vgpu/sim/exec/nccl_rendezvous.h names it so), and the folder where they hand each other
    the data of small collectives (nccl_data_exchange.h): the job is over."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", job_id)
    path = f"/dev/shm/vgpu-nccl-{os.getuid()}-{safe}"
    try:
        os.remove(path)
    except OSError:
        pass  # no NCCL collective on the sim backend, or removed already
    shutil.rmtree(path + ".data", ignore_errors=True)


def main(argv, configured):
    base = dict(os.environ)
    try:
        options = options_mod.parse(argv)
        setting, cluster, backend, layout, notes = prepare(options, configured, base)
    except UsageError as e:
        _say(str(e))
        return 2
    for n in notes:
        _say(n)
    if options.print_env:
        sys.stdout.write(environment.format_env(setting))
        return 0

    env = dict(base)
    env.update(setting)
    # The job's own database (environment.job_kernel_db), not one the caller named.
    own_db = setting.get("VGPU_KERNEL_DB") == environment.job_kernel_db(base, setting["VGPU_JOB_ID"])
    if own_db:
        os.makedirs(setting["VGPU_KERNEL_DB"], mode=0o700, exist_ok=True)
    stats = launch_stats.prepare(setting, daemon.ensure_private_dir(daemon.socket_dir(base)))
    misses = setting.get("VGPU_KERNEL_DB_MISSES")
    if misses and os.path.exists(misses):
        os.remove(misses)  # a file of an earlier run with the same job id
    for name in environment.removed(setting):
        env.pop(name, None)
    mps_daemon = None
    if options.mps and backend != "passthrough":
        _say("--mps applies to the passthrough backend (real GPUs) only: ignored")
    elif options.mps:
        try:
            # The caller's environment, not the job's: the daemon starts the MPS server, which must
            # load the real driver (with the job's LD_LIBRARY_PATH it loaded vgpu's and every client's
            # cuInit failed, 2026-11-26).
            mps_daemon = mps.start(setting["VGPU_JOB_ID"], daemon.ensure_private_dir(daemon.socket_dir(base)), base)
        except UsageError as e:
            _say(str(e))
            return 2
        env.update(mps_daemon.vars)
    monitor = Monitor(setting["VGPU_JOB_ID"], layout.vgpu_smi, env, options.sample_interval)
    monitor.start()
    started = time.monotonic()
    try:
        status = _run(options.command, env)
    finally:
        mps_note = mps_daemon.stop() if mps_daemon else None
    wall = time.monotonic() - started
    rows = monitor.final()
    end_notes = list(monitor.errors)
    if monitor.incarnations > 1:
        end_notes.append(f"the job's processes ran one after another ({monitor.incarnations} "
                         "separate status regions): the figures are the last one's")
    if own_db:
        shutil.rmtree(setting["VGPU_KERNEL_DB"], ignore_errors=True)  # the job's own: done with it
    _remove_nccl_table(setting["VGPU_JOB_ID"])
    stopped = daemon.stop(setting["VGPU_JOB_ID"], env)
    if stopped:
        end_notes.append(stopped)
    if mps_note:
        end_notes.append(mps_note)
    counted = launch_stats.finish(stats)
    if counted:
        end_notes.append(counted)
    if misses:
        for line in kernel_db.report(misses, setting["VGPU_KERNEL_DB"]):
            _say(line)
    timeline = setting.get("VGPU_TIMELINE") or base.get("VGPU_TIMELINE")
    if timeline:
        # The passthrough's processes each left a part beside the merged trace (timeline_writer.h).
        shutil.rmtree(f"{timeline}.parts.{setting['VGPU_JOB_ID']}", ignore_errors=True)
        state = "written" if os.path.isfile(timeline) else "not written"
        end_notes.append(f"timeline ({state}): {timeline}")
    if not options.no_summary:
        print(summary.render(setting["VGPU_JOB_ID"], backend, cluster, status, wall, rows,
                             end_notes, options.sample_interval), file=sys.stderr, flush=True)
    return status
