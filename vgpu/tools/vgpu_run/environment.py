"""The environment a job runs in. Each variable and why:

  LD_LIBRARY_PATH     vgpu's libcuda.so.1 (the chosen backend's) and virtual libnvidia-ml.so.1
                      first: programs, cudart and NCCL load the driver by name, and PyTorch
                      counts devices through NVML before it asks the driver.
  VGPU_REAL_LIBCUDA   passthrough only: the real driver, which the library path now shadows.
  VGPU_CONFIG, VGPU_NODES, VGPU_GPUS_PER_NODE, VGPU_GPU_MODEL, VGPU_MEMORY
                      the cluster options (simcore/cluster: read by the driver, NVML, the
                      plugin and vgpud alike).
  VGPU_JOB_ID         one id for every process of the job: they share one status region
                      (vgpu-smi --job ID) and one vgpud, and no other job's.
  VGPU_STATUS_KEEP=1  the last process of the job leaves the status region in place: vgpu-run
                      reads the final figures from it and then removes it (a job shorter than
                      the monitor's poll would otherwise come and go unseen).
  VGPU_TIMELINE       --timeline: where the driver writes the simulated timeline at exit.
  VGPU_KERNEL_DB      unless set by the caller: a kernel-time database private to the job, so
                      that a kernel measured by one rank is not measured again by the others
                      (one measurement per signature per job); removed when the job ends.
  VGPU_LAUNCH_STATS   passthrough, unless set by the caller: one file of launch counts per
                      process in a folder private to the job, added up in the summary
                      (launch_stats.py).
  LD_PRELOAD          --virtual-clock: vgpu's clock shim (libvgpu-vclock.so) after whatever the
                      caller preloads (a sanitizer runtime must stay first): each thread that
                      submitted GPU work reads its virtual clock from clock_gettime,
                      gettimeofday and time (README, "The job's own clock").
  VGPU_SIMCORE=daemon the plugin's transfers are timed by the job's shared vgpud, so ranks in
  VGPU_VGPUD          separate processes share one network; VGPU_VGPUD is the binary the plugin
                      starts on demand.
  NCCL_NET_PLUGIN     the plugin by absolute path (NCCL 2.28 dlopens a path as given).
  NCCL_NET=vgpu       passthrough: NCCL uses the plugin's network or fails ("Failed to
                      initialize any NET plugin"): never a silent fallback to its own socket/IB
                      transports.
  NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1
                      passthrough: no direct GPU-to-GPU or host shared-memory paths, so that
                      every byte between ranks, inside a node too, goes through the plugin and
                      is timed.
  NCCL_P2P_DISABLE=0, NCCL_SHM_DISABLE=0, no NCCL_NET
                      sim: the sim backend executes no kernel, and NCCL's network transport
                      moves each step only once its kernel has written it (the proxy thread
                      polls the kernel's FIFO in host memory): its proxy operations would never
                      end and ncclCommDestroy would wait for them forever. NCCL's P2P transport
                      has no proxy work per operation, so ranks in one process use it (NCCL
                      sees the virtual NVLinks through the virtual NVML); each NCCL kernel then
                      lasts what the collective model says (vgpu/sim/exec/nccl_collectives.h).
  NCCL_IGNORE_DISABLED_P2P=1
                      sim: NCCL takes every GPU of one process for one node; GPUs of different
                      virtual nodes see each other's NVSwitch through NVML but have no peer
                      access, which NCCL calls a hardware fault and stops at. With this it
                      connects them through its SHM transport (no proxy work either).
  NCCL_NVLS_ENABLE=0, NCCL_COLLNET_ENABLE=0
                      no NVLink SHARP or in-network reductions: they bypass the plugin.
  NCCL_TOPO_FILE      the generated topology (topology.py says what it holds and why).
  NCCL_PROFILER_PLUGIN
                      the same library, whose NCCL profiler tells the driver which kernel launch
                      each transfer belongs to, so each NCCL kernel is timed by its own
                      transfers. A value of the caller's is kept (with a note): NCCL loads one
                      profiler, and NCCL kernels are then attributed their transfers by launch
                      order, which is right only where the host does not run ahead.

NCCL_HOSTID is not set: with P2P and SHM disabled NCCL already treats each GPU as its own node
(topology.py), so a host id per virtual node would change nothing inside a host, and one
environment cannot give the ranks of one torchrun different ids."""
import os
import shlex

from . import daemon

# Variables vgpu-run must own; a different value in the caller's environment is replaced
# (with a note), since the job would otherwise bypass the plugin.
NCCL_FIXED = {
    "NCCL_NET": "vgpu",
    "NCCL_P2P_DISABLE": "1",
    "NCCL_SHM_DISABLE": "1",
    "NCCL_NVLS_ENABLE": "0",
    "NCCL_COLLNET_ENABLE": "0",
}
# The sim backend's: transports without per-operation proxy work (see above).
NCCL_FIXED_SIM = {
    "NCCL_P2P_DISABLE": "0",
    "NCCL_SHM_DISABLE": "0",
    "NCCL_IGNORE_DISABLED_P2P": "1",
    "NCCL_NVLS_ENABLE": "0",
    "NCCL_COLLNET_ENABLE": "0",
}


def nccl_fixed(backend):
    return NCCL_FIXED_SIM if backend == "sim" else NCCL_FIXED


def cluster_vars(options):
    out = {}
    if options.config:
        out["VGPU_CONFIG"] = os.path.abspath(options.config)
    if options.nodes:
        out["VGPU_NODES"] = str(options.nodes)
    if options.gpus:
        out["VGPU_GPUS_PER_NODE"] = str(options.gpus)
    if options.model:
        out["VGPU_GPU_MODEL"] = options.model
    if options.memory:
        out["VGPU_MEMORY"] = options.memory
    return out


def library_path(dirs, inherited):
    parts = []
    for d in list(dirs) + (inherited.split(":") if inherited else []):
        if d and d not in parts:
            parts.append(d)
    return ":".join(parts)


def preload_with(lib, inherited):
    """LD_PRELOAD with `lib` after the inherited entries (split on spaces and colons, as the
    dynamic loader does), once."""
    parts = [p for p in inherited.replace(":", " ").split() if p]
    if not any(os.path.basename(p) == os.path.basename(lib) for p in parts):
        parts.append(lib)
    return " ".join(parts)


def job_vars(options, layout, backend, real_driver, job_id, topo_file, base):
    """Everything vgpu-run sets, in a stable order."""
    out = {"LD_LIBRARY_PATH": library_path([layout.libcuda_dir(backend), layout.nvml_libdir],
                                           base.get("LD_LIBRARY_PATH", ""))}
    if options.virtual_clock:
        out["LD_PRELOAD"] = preload_with(layout.vclock_lib, base.get("LD_PRELOAD", ""))
    if real_driver:
        out["VGPU_REAL_LIBCUDA"] = real_driver
    out.update(cluster_vars(options))
    out["VGPU_JOB_ID"] = job_id
    out["VGPU_STATUS_KEEP"] = "1"
    if options.timeline:
        out["VGPU_TIMELINE"] = os.path.abspath(options.timeline)
    if not base.get("VGPU_KERNEL_DB") and not options.record and not options.kernel_db:
        out["VGPU_KERNEL_DB"] = job_kernel_db(base, job_id)
    out["VGPU_SIMCORE"] = "daemon"
    out["VGPU_VGPUD"] = layout.vgpud
    out["NCCL_NET_PLUGIN"] = layout.nccl_plugin
    out.update(nccl_fixed(backend))
    out["NCCL_TOPO_FILE"] = topo_file
    out["NCCL_PROFILER_PLUGIN"] = base.get("NCCL_PROFILER_PLUGIN") or layout.nccl_plugin
    return out


def job_kernel_db(base, job_id):
    """The job's own kernel-time database (a folder in the user's private runtime dir; main()
    creates it before the job and removes it after)."""
    return os.path.join(daemon.ensure_private_dir(daemon.socket_dir(base)), f"kernel-times-{job_id}")


def removed(setting):
    """The caller's variables the job must not see: NCCL_NET on the sim backend."""
    return [name for name in NCCL_FIXED if name not in setting]


def replaced(setting, base):
    """Notes for variables of the caller's environment that vgpu-run overrides."""
    notes = []
    for name in list(NCCL_FIXED) + ["NCCL_NET_PLUGIN", "NCCL_TOPO_FILE", "VGPU_SIMCORE"]:
        old = base.get(name)
        if old is not None and name not in setting:
            notes.append(f"{name}={old} from the environment removed (sim backend: NCCL's "
                         "network transport would wait for kernels that never run)")
        elif old is not None and old != setting[name]:
            notes.append(f"{name}={old} from the environment replaced by {setting[name]}")
    own = base.get("NCCL_PROFILER_PLUGIN")
    if own and own != setting["NCCL_NET_PLUGIN"]:
        notes.append(f"NCCL_PROFILER_PLUGIN={own} from the environment kept: NCCL kernels are "
                     "attributed their transfers by launch order, not by vgpu's profiler")
    return notes


def format_env(setting):
    return "".join(f"{k}={shlex.quote(v)}\n" for k, v in setting.items())
