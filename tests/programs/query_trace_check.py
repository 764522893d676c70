"""VGPU_QUERY_TRACE on both backends: runs query_trace_program (one query of each kind the trace
records) with the trace on and checks that the file holds, in order, one line per query in the
shared words of vgpu/front/driver/query_lines.h, with the answer the program itself was told.

    query_trace_check.py PROGRAM SIM_LIBDIR PASSTHROUGH_LIBDIR SIM_LIBCUDA [CUBLAS_PROGRAM CUDA_LIBDIR]

1. the sim backend as a virtual H200: every expected line, the H200's answers (132 SMs,
   232,448 bytes of opt-in shared memory, 66 clusters of 2, 150,109,880,320 bytes), no pointer;
2. a second process appends to the same file (the lines of the first stay as they were);
3. the passthrough over the sim backend as its "real driver" (as in the passthrough suite): the
   same lines, the forwarded queries answered by the driver underneath (whose own lines, written
   because it reads the same setting, interleave and are allowed);
4. a trace file that cannot be opened leaves the program running as before;
5. (given a cuBLAS program) the private slot cuBLAS calls whose meaning is unknown (1734dc26[4])
   is answered by the sim as an H200 answered it and written so ("private 1734dc26[4] args=...
   -> 0 out=[a0:p,p a1:p,p ...]": success, an address in both words at a0 and in the first at
   a1), and under the passthrough its call goes through the passthrough's traced copy of the
   table to the driver underneath and back (two lines per call), the program finishing as
   without the trace.
"""
import os
import re
import subprocess
import sys
import tempfile

program, sim_dir, pt_dir, sim_lib = sys.argv[1:5]
cublas_program, cuda_dir = (sys.argv[5:7] + [None, None])[:2]
base = dict(os.environ, VGPU_GPU_MODEL="H200-141GB", VGPU_GPUS_PER_NODE="1", VGPU_NODES="1",
            VGPU_LOG_LEVEL="warn")
base.pop("VGPU_QUERY_TRACE", None)
failures = []
# What the passthrough answers by asking the real driver (the rest its front answers itself).
FORWARDED = ("cuFunc", "cuKernel", "cuOccupancy", "cuCtxGetLimit", "cuModule", "cuLibrary")


def run(env, label):
    out = subprocess.run([program], env=env, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f"{label}: query_trace_program failed ({out.returncode}): {out.stderr[-2000:]}")
    answers = {}
    for line in out.stdout.splitlines():
        _, api, rest = line.split(" ", 2)
        answers.setdefault(api, []).append(rest)
    return answers


def expected(a):
    """The lines the program's queries must leave, in order, built from its own answers."""
    def ok(api, i=0):
        v = a[api][i]
        if v.startswith("error"):
            failures.append(f"the program's {api} #{i} failed: {v}")
        return v
    fn = "fn=probe_kernel"
    cfg = "grid=2x1x1 block=128x1x1 smem=231424 attrs=[CLUSTER_DIMENSION(4)=2x1x1]"
    return [
        f"cuDriverGetVersion -> CUDA_SUCCESS {ok('cuDriverGetVersion')}",
        "cuDeviceGetAttribute dev=0 attr=MULTIPROCESSOR_COUNT(16) -> CUDA_SUCCESS 132",
        "cuDeviceGetAttribute dev=0 attr=MAX_SHARED_MEMORY_PER_BLOCK_OPTIN(97) -> CUDA_SUCCESS 232448",
        "cuDeviceGetAttribute dev=0 attr=100000 -> CUDA_ERROR_INVALID_VALUE",
        re.compile(r"cuMemGetInfo -> CUDA_SUCCESS free=\d+ total=150109880320"),
        f"cuCtxGetLimit limit=0 -> CUDA_SUCCESS {ok('cuCtxGetLimit')}",
        "cuModuleLoadData -> CUDA_SUCCESS",
        "cuModuleGetFunction name=probe_kernel -> CUDA_SUCCESS",
        "cuModuleGetFunction name=no_such_kernel -> CUDA_ERROR_NOT_FOUND",
        f"cuFuncGetAttribute {fn} attr=MAX_THREADS_PER_BLOCK(0) -> CUDA_SUCCESS {ok('cuFuncGetAttribute')}",
        f"cuFuncSetAttribute {fn} attr=MAX_DYNAMIC_SHARED_SIZE_BYTES(8) value=232448 -> CUDA_SUCCESS",
        f"cuFuncSetAttribute {fn} attr=NUM_REGS(4) value=7 -> CUDA_ERROR_INVALID_VALUE",
        f"cuOccupancyMaxActiveBlocksPerMultiprocessor {fn} block=128 smem=0 flags=0 -> CUDA_SUCCESS "
        f"{ok('cuOccupancyMaxActiveBlocksPerMultiprocessor')}",
        re.compile(rf"cuOccupancyMaxPotentialBlockSize {fn} smem=0 limit=0 flags=0 -> CUDA_SUCCESS "
                   rf"min_grid=\d+ block={ok('cuOccupancyMaxPotentialBlockSize')}"),
        f"cuOccupancyAvailableDynamicSMemPerBlock {fn} blocks=2 block=128 -> CUDA_SUCCESS "
        f"{ok('cuOccupancyAvailableDynamicSMemPerBlock')}",
        f"cuOccupancyMaxActiveClusters {fn} {cfg} -> CUDA_SUCCESS 66",
        f"cuOccupancyMaxPotentialClusterSize {fn} {cfg} -> CUDA_SUCCESS {ok('cuOccupancyMaxPotentialClusterSize')}",
        "cuLibraryLoadData -> CUDA_SUCCESS",
        "cuLibraryGetKernel name=probe_kernel -> CUDA_SUCCESS",
        f"cuKernelGetAttribute {fn} dev=0 attr=NUM_REGS(4) -> CUDA_SUCCESS {ok('cuKernelGetAttribute')}",
    ]


def matches(want, line):
    return want.fullmatch(line) is not None if isinstance(want, re.Pattern) else want == line


def check_in_order(label, lines, wants):
    """Every wanted line, in this order, among `lines` (others may come between)."""
    i = 0
    for want in wants:
        while i < len(lines) and not matches(want, lines[i]):
            i += 1
        if i == len(lines):
            shown = want.pattern if isinstance(want, re.Pattern) else want
            failures.append(f"{label}: no line (in order) {shown!r}")
            return
        i += 1


with tempfile.TemporaryDirectory() as tmp:
    trace = os.path.join(tmp, "queries.txt")
    sim_env = dict(base, LD_LIBRARY_PATH=sim_dir, VGPU_QUERY_TRACE=trace)
    answers = run(sim_env, "sim")
    first = open(trace).read().splitlines()
    wants = expected(answers)
    check_in_order("sim", first, wants)
    for line in first:
        if re.search(r"0x[0-9a-f]{6,}|\(nil\)", line):
            failures.append(f"sim: a line shows a pointer: {line!r}")
    print(f"sim: {len(first)} lines")

    run(sim_env, "sim, second process")
    both = open(trace).read().splitlines()
    if both[:len(first)] != first or len(both) != 2 * len(first):
        failures.append(f"a second process did not append its {len(first)} lines after the first's "
                        f"({len(both)} lines now)")

    pt_trace = os.path.join(tmp, "passthrough.txt")
    pt_env = dict(base, LD_LIBRARY_PATH=pt_dir, VGPU_REAL_LIBCUDA=sim_lib, VGPU_PHYSICAL_DEVICES="0",
                  VGPU_JOB_ID="query_trace_check_passthrough", VGPU_QUERY_TRACE=pt_trace)
    pt_answers = run(pt_env, "passthrough")
    pt_lines = open(pt_trace).read().splitlines()
    pt_wants = expected(pt_answers)
    check_in_order("passthrough", pt_lines, pt_wants)
    # The queries the passthrough forwards leave two lines each, the driver underneath's and the
    # passthrough's own (query_api.cpp): the sim's line alone must not pass for the passthrough's.
    for want in pt_wants:
        if isinstance(want, str) and want.startswith(FORWARDED):
            if sum(matches(want, line) for line in pt_lines) < 2:
                failures.append(f"passthrough: {want!r} was not written by the passthrough itself")
    print(f"passthrough over the sim: {len(pt_lines)} lines")

    bad_env = dict(sim_env, VGPU_QUERY_TRACE=os.path.join(tmp, "no", "such", "folder", "q.txt"))
    if run(bad_env, "unwritable trace") != answers:
        failures.append("with an unwritable trace file the program was answered differently")

    if cublas_program:
        def private_lines(env, label):
            path = env["VGPU_QUERY_TRACE"]
            if os.environ.get("VGPU_TEST_PRELOAD"):
                env = dict(env, LD_PRELOAD=os.environ["VGPU_TEST_PRELOAD"])
            out = subprocess.run([cublas_program], env=env, capture_output=True, text=True, timeout=120)
            if out.returncode != 0:
                failures.append(f"{label}: the cuBLAS program failed ({out.returncode}): {out.stdout[-500:]}")
                return []
            return [l for l in open(path).read().splitlines() if l.startswith("private 1734dc26[4] ")]
        # The cuBLAS program wants the default eight GPUs of a node.
        sim_private = private_lines(dict(sim_env, LD_LIBRARY_PATH=f"{sim_dir}:{cuda_dir}", VGPU_GPUS_PER_NODE="8",
                                         VGPU_QUERY_TRACE=os.path.join(tmp, "cublas_sim.txt")), "sim")
        pt_private = private_lines(dict(pt_env, LD_LIBRARY_PATH=f"{pt_dir}:{cuda_dir}", VGPU_GPUS_PER_NODE="8",
                                        VGPU_QUERY_TRACE=os.path.join(tmp, "cublas_pt.txt")), "passthrough")
        if not sim_private or any(" -> 0 out=[a0:p,p a1:p," not in l for l in sim_private):
            failures.append(f"sim: cuBLAS's 1734dc26[4] calls not answered as the H200 did: {sim_private[:3]}")
        if len(pt_private) != 2 * len(sim_private):
            failures.append(f"passthrough: {len(pt_private)} lines of 1734dc26[4], want two per call "
                            f"(the driver underneath's and the passthrough's forwarder's) of {len(sim_private)}")
        print(f"cuBLAS: {len(sim_private)} calls of 1734dc26[4] on the sim, {len(pt_private)} lines under the passthrough")

for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)
