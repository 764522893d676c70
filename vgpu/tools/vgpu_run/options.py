"""vgpu-run's command line: `vgpu-run [options] -- <command...>`."""
import argparse

from .errors import UsageError

USAGE = "vgpu-run [options] -- <command...>"

DESCRIPTION = """\
Runs an unmodified command (a CUDA program, python, torchrun, ...) on vgpu's virtual GPUs:
vgpu's libcuda.so.1 and virtual NVML first on the library path, NCCL routed through vgpu's net
plugin, one job id shared by every process (status region, vgpud), and a summary on stderr at
the end. The exit status is the command's."""

EPILOG = """\
examples:
  vgpu-run -- python3 train.py
  vgpu-run --gpus 8 --model H200 -- torchrun --nproc_per_node 8 train.py
  vgpu-run -- python3 train.py                   # its own step-time logs in virtual time
  vgpu-run --print-env                 # what it would set, as NAME=value lines
exit status: the command's (128+N when a signal N ended it); 2 when vgpu-run refuses to start
(the message names what to change); 127/126 when the command cannot be found/executed."""


def positive_int(text):
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, through our own error path
        raise UsageError(f"{message} (see vgpu-run --help)")


def _parser():
    p = _Parser(prog="vgpu-run", usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("backend")
    g.add_argument("--backend", choices=("auto", "sim", "passthrough"), default="auto",
                   help="sim: no GPU needed, kernels are timed by the kernel-time database or the "
                        "model; passthrough: the work runs on the real GPU; auto (default): "
                        "passthrough when /dev/nvidiactl exists and a real libcuda.so.1 is found")
    g.add_argument("--lib-dir", metavar="DIR",
                   help="take the libraries from DIR: sim/libcuda.so.1 (or libcuda.so.1), "
                        "passthrough/libcuda.so.1 (or vgpu-passthrough/libcuda.so.1), "
                        "libnvidia-ml.so.1, libnccl-net-vgpu.so, libvgpu-vclock.so (or "
                        "vclock/libvgpu-vclock.so)")
    g.add_argument("--bin-dir", metavar="DIR", help="take vgpud and vgpu-smi from DIR")
    c = p.add_argument_group("cluster (each sets the variable the driver reads)")
    c.add_argument("--config", metavar="FILE", help="cluster TOML file (VGPU_CONFIG)")
    c.add_argument("--nodes", type=positive_int, metavar="N", help="nodes (VGPU_NODES)")
    c.add_argument("--gpus", type=positive_int, metavar="N",
                   help="GPUs per node (VGPU_GPUS_PER_NODE)")
    c.add_argument("--model", metavar="NAME",
                   help="GPU model: H100-SXM-80GB, H200-141GB, A100-SXM-80GB, B200 or an alias "
                        "such as H100 (VGPU_GPU_MODEL)")
    c.add_argument("--memory", metavar="SIZE", help="capacity per GPU, e.g. 80GiB (VGPU_MEMORY)")
    j = p.add_argument_group("job")
    j.add_argument("--job-id", metavar="ID",
                   help="the job's id (VGPU_JOB_ID; default: the environment's VGPU_JOB_ID, "
                        "else a new one); vgpu-smi --job ID watches it")
    j.add_argument("--timeline", metavar="FILE",
                   help="write the simulated timeline (Chrome trace) to FILE (VGPU_TIMELINE)")
    j.add_argument("--record", metavar="DB",
                   help="passthrough: record every kernel's measured duration by launch "
                        "signature in the kernel-time database DB (VGPU_KERNEL_DB)")
    j.add_argument("--kernel-db", metavar="DB",
                   help="sim: time kernels by the database DB (VGPU_KERNEL_DB) and list at the "
                        "end the launch signatures it lacked, with the time they were given")
    j.add_argument("--mps", action="store_true",
                   help="passthrough, experimental (not yet measured): run the job's processes as "
                        "clients of a private MPS daemon (nvidia-cuda-mps-control), so that ranks "
                        "sharing a GPU run their kernels side by side instead of time-slicing")
    clock = j.add_mutually_exclusive_group()
    clock.add_argument("--virtual-clock", dest="virtual_clock", action="store_const", const=True,
                       default=None,
                       help="(the default) the job's own wall-clock timing (time.perf_counter, "
                            "time.time, std::chrono::steady_clock) reads the virtual clock on "
                            "every thread that launched GPU work, so its logs of step time and "
                            "tokens/s, and nccl-tests' bandwidths, report the simulated cluster; "
                            "other threads keep real time (preloads libvgpu-vclock.so; named "
                            "explicitly, a missing shim is an error)")
    clock.add_argument("--real-clock", dest="virtual_clock", action="store_const", const=False,
                       help="leave the job's clocks real (no clock shim): only its CUDA events "
                            "and synchronizations report virtual time")
    o = p.add_argument_group("output")
    o.add_argument("--print-env", action="store_true",
                   help="print the environment it would set (NAME=value, shell-quoted) and exit")
    o.add_argument("--no-summary", action="store_true", help="print no summary at the end")
    o.add_argument("--sample-interval", type=positive_float, default=0.5, metavar="SEC",
                   help="how often the job's memory use is sampled for the peak (default 0.5)")
    return p


def parse(argv):
    """(options, command). Options end at the first "--"; without one, at the first word that
    is not an option (so `vgpu-run python3 x.py --lr 1` works too)."""
    if "--" in argv:
        cut = argv.index("--")
        args = _parser().parse_args(argv[:cut])
        args.command = argv[cut + 1:]
        return args
    parser = _parser()
    parser.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser.parse_args(argv)
