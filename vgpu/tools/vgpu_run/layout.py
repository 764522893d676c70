"""Where vgpu's pieces are, which backend to use, and where the real driver is."""
import os
from dataclasses import dataclass
from typing import Optional

from .errors import UsageError

PLUGIN_FILE = "libnccl-net-vgpu.so"
VCLOCK_FILE = "libvgpu-vclock.so"

# The real driver's usual places, in the order vgpu/passthrough/real_driver.cpp tries them
# after VGPU_REAL_LIBCUDA (which, when set, is the only candidate there too).
REAL_DRIVER_PATHS = (
    "/usr/local/nvidia/lib64/libcuda.so.1",
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
)


@dataclass
class Layout:
    sim_libdir: Optional[str]
    passthrough_libdir: Optional[str]
    nvml_libdir: Optional[str]
    nccl_plugin: Optional[str]
    vgpud: Optional[str]
    vgpu_smi: Optional[str]
    origin: str  # where the paths came from, for messages
    vclock_lib: Optional[str] = None  # the clock shim (--virtual-clock)

    def libcuda_dir(self, backend):
        return self.sim_libdir if backend == "sim" else self.passthrough_libdir


def _first_dir_with(base, subdirs, name):
    for sub in subdirs:
        d = os.path.join(base, sub) if sub else base
        if os.path.isfile(os.path.join(d, name)):
            return os.path.abspath(d)
    return os.path.abspath(os.path.join(base, subdirs[0]) if subdirs[0] else base)


def resolve(options, configured):
    """The paths from the configured defaults, overridden by --lib-dir / --bin-dir."""
    layout = Layout(configured.get("sim_libdir"), configured.get("passthrough_libdir"),
                    configured.get("nvml_libdir"), configured.get("nccl_plugin"),
                    configured.get("vgpud"), configured.get("vgpu_smi"), "the build",
                    configured.get("vclock_lib"))
    if options.lib_dir:
        d = options.lib_dir
        if not os.path.isdir(d):
            raise UsageError(f"--lib-dir {d}: no such directory")
        # .device/lib (tests/gpu/stage) has sim/ and passthrough/; an installed libdir has the
        # sim driver itself and vgpu-passthrough/.
        layout.sim_libdir = _first_dir_with(d, ("sim", ""), "libcuda.so.1")
        layout.passthrough_libdir = _first_dir_with(d, ("passthrough", "vgpu-passthrough"),
                                                    "libcuda.so.1")
        layout.nvml_libdir = os.path.abspath(d)
        layout.nccl_plugin = os.path.abspath(os.path.join(d, PLUGIN_FILE))
        # An installed libdir has the shim itself; a build-like folder may keep it in vclock/.
        layout.vclock_lib = os.path.join(_first_dir_with(d, ("", "vclock"), VCLOCK_FILE),
                                         VCLOCK_FILE)
        layout.origin = f"--lib-dir {d}"
    if options.bin_dir:
        if not os.path.isdir(options.bin_dir):
            raise UsageError(f"--bin-dir {options.bin_dir}: no such directory")
        layout.vgpud = os.path.abspath(os.path.join(options.bin_dir, "vgpud"))
        layout.vgpu_smi = os.path.abspath(os.path.join(options.bin_dir, "vgpu-smi"))
    return layout


def require(layout, backend, virtual_clock=False):
    """Refuses (UsageError) when a piece the job needs is missing."""
    fix_lib = ("build it (meson compile -C <builddir> ...) or pass --lib-dir DIR"
               if layout.origin == "the build" else f"check {layout.origin}")
    fix_bin = "pass --bin-dir DIR holding vgpud and vgpu-smi"
    libcuda_dir = layout.libcuda_dir(backend)
    checks = [
        (libcuda_dir and os.path.join(libcuda_dir, "libcuda.so.1"), f"vgpu's {backend} libcuda.so.1",
         fix_lib),
        (layout.nvml_libdir and os.path.join(layout.nvml_libdir, "libnvidia-ml.so.1"),
         "vgpu's virtual NVML (libnvidia-ml.so.1)", fix_lib),
        (layout.nccl_plugin, f"the NCCL net plugin ({PLUGIN_FILE})", fix_lib),
        (layout.vgpud, "vgpud", fix_bin),
        (layout.vgpu_smi, "vgpu-smi", fix_bin),
    ]
    if virtual_clock:
        checks.append((layout.vclock_lib, f"the clock shim for --virtual-clock ({VCLOCK_FILE})",
                       fix_lib))
    for path, what, fix in checks:
        if not path:
            raise UsageError(f"{what}: no path configured; {fix}")
        if not os.path.isfile(path):
            raise UsageError(f"{what} not found at {path}: {fix}")


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def find_real_driver(environ, layout):
    """(path or None, the candidates tried). VGPU_REAL_LIBCUDA, when set, is the only one.
    As in real_driver.cpp, only the passthrough library itself is skipped (vgpu mounted over
    the system's driver, a container-style swap); any other libcuda.so.1 counts, so that tests
    can run the passthrough backend over the sim one."""
    own = layout.passthrough_libdir and os.path.join(layout.passthrough_libdir, "libcuda.so.1")
    explicit = environ.get("VGPU_REAL_LIBCUDA")
    candidates = [explicit] if explicit else list(REAL_DRIVER_PATHS)
    for path in candidates:
        if os.path.isfile(path) and not (own and _same_file(path, own)):
            return os.path.abspath(path), candidates
    return None, candidates


def choose_backend(requested, environ, layout):
    """(backend, real driver path or None). auto: passthrough when a real NVIDIA driver is
    present (/dev/nvidiactl and a real libcuda.so.1), else sim."""
    if requested == "sim":
        return "sim", None
    real, tried = find_real_driver(environ, layout)
    if requested == "passthrough":
        if real is None:
            raise UsageError(f"--backend passthrough: no real libcuda.so.1 found (tried "
                             f"{', '.join(tried)}): set VGPU_REAL_LIBCUDA or use --backend sim")
        return "passthrough", real
    if real is not None and os.path.exists("/dev/nvidiactl"):
        return "passthrough", real
    return "sim", None
