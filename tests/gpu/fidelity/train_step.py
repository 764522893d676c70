"""One GPT-2 training step, timed the way users time their own jobs: the host clock
(time.perf_counter) around each step, the step ending in torch.cuda.synchronize().

    python3 train_step.py single [--compile]             # one GPU
    torchrun --nproc_per_node N train_step.py ddp         # DistributedDataParallel
    torchrun --nproc_per_node N train_step.py fsdp2       # fully_shard per block (FSDP2)
    torchrun --nproc_per_node N train_step.py pp          # N pipeline stages, GPipe (--micro M)

Options: --layers L (12) --d D (768) --batch B (8 per rank) --seq S (1024) --steps N (30: the step moves
by 10-40% from step to step on the device machines, real and virtual, so the median needs them)
--warmup W (5) --kernels FILE (after the timed steps, one more step under torch.profiler: each
kernel's count and total GPU time on this rank go to FILE, "%r" replaced by the rank, for
kernel_compare.py to set beside vgpu's timeline of the same step; the step's trace to FILE.trace.json). Besides the step, CUDA events split it into forward, backward and optimizer
phases (what each phase costs tells where a simulated step differs from the real one), and rank
0's host side of each (its step clock and its thread's CPU time: host_ms, thread_cpu_ms) tells a
slower host from a longer wait.
Prints, on rank 0, one line: RESULT {json} with the median and every step time in ms.
"""
import argparse
import gc
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_speed  # noqa: E402


def process_cpu_s():
    """User and system CPU seconds of every thread of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_probe_ms():
    """Thread CPU ms of a fixed pure-Python workload (~2 ms; cpu_speed.probe_ms): how fast this
    host runs the interpreter right now. Run between timed steps, outside their clocks, so that a
    step that reads slow can be told apart from a host that ran slow (the GPU hosts' real steps
    moved 2x between runs with identical work)."""
    return cpu_speed.probe_ms()


def pin_rank():
    """PIN_CORES_PER_RANK=N (an experiment, not a default): this rank's process keeps N logical
    CPUs of those it may use, distinct physical cores first, so that ranks sharing one host do
    not share cores; set before torch starts its threads, which inherit it."""
    per = int(os.environ.get("PIN_CORES_PER_RANK", "0") or 0)
    if per <= 0:
        return
    allowed, order, seen = sorted(os.sched_getaffinity(0)), [], set()
    for cpu in allowed:
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
                core = f.read().strip()
        except OSError:
            core = str(cpu)
        if core not in seen:
            order.append(cpu)
            seen.add(core)
    order += [c for c in allowed if c not in order]
    local = int(os.environ.get("LOCAL_RANK", "0"))
    mine = order[local * per:(local + 1) * per] or allowed
    os.sched_setaffinity(0, mine)


pin_rank()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gpt2_tiny  # noqa: E402


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["single", "ddp", "fsdp2", "pp"])
    # pp: the batch in M micro-batches through the stages (GPipe: every forward, then every backward)
    p.add_argument("--micro", type=int, default=4)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d", type=int, default=768)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--kernels", default=None)
    # Python's cyclic collector off after warm-up (what was alive then frozen): a full collection
    # over FSDP2's objects lands on some steps and not others, so the steps' spread falls when
    # comparing runs; the job under vgpu and the real one are run alike.
    p.add_argument("--gc-off", action="store_true")
    return p.parse_args()


class Stage(torch.nn.Module):
    """One pipeline stage of GPT-2: its share of the blocks, the embeddings on the first stage, the
    final norm and the head on the last (its own weight: the tie to the embedding cannot cross
    GPUs)."""

    def __init__(self, full, stage, stages):
        super().__init__()
        per = len(full.blocks) // stages
        lo, hi = stage * per, (len(full.blocks) if stage == stages - 1 else (stage + 1) * per)
        self.first, self.last = stage == 0, stage == stages - 1
        self.blocks = torch.nn.ModuleList(full.blocks[lo:hi])
        if self.first:
            self.wte, self.wpe = full.wte, full.wpe
        if self.last:
            self.ln, self.head = full.ln, full.head
            if not self.first:
                self.head.weight = torch.nn.Parameter(full.wte.weight.detach().clone())

    def forward(self, x):
        if self.first:
            x = self.wte(x) + self.wpe(torch.arange(x.shape[1], device=x.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x)) if self.last else x


def build(args, device):
    torch.manual_seed(0)
    model = gpt2_tiny.GPT2(layers=args.layers, d=args.d, heads=max(1, args.d // 64))
    if args.mode == "pp":
        model = Stage(model, dist.get_rank(), dist.get_world_size())
    model = model.to(device)
    if args.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[device.index])
    elif args.mode == "fsdp2":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for blk in model.blocks:
            fully_shard(blk, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
    if args.compile:
        model = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=args.mode != "fsdp2")
    return model, opt


def pipeline_pass(model, idx, args, device, forward_done, backward_done):
    """One GPipe step on this stage: every micro-batch's forward (receiving activations from the
    stage before, sending to the one after), then every backward in reverse (receiving the output's
    gradient from the stage after, sending the input's to the one before). Returns the loss on the
    last stage, 0 elsewhere. forward_done / backward_done: called as each phase ends (one_step's
    phase marks)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    first, last = rank == 0, rank == world - 1
    micro = idx.chunk(args.micro)
    inputs, outputs, total = [], [], torch.zeros((), device=device)
    for m in micro:
        if first:
            x = m[:, :-1]
        else:
            x = torch.empty(m.shape[0], args.seq, args.d, device=device)
            dist.recv(x, src=rank - 1)
            x.requires_grad_()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = model(x)
            if last:
                y = F.cross_entropy(y.float().reshape(-1, y.shape[-1]), m[:, 1:].reshape(-1)) / args.micro
                total = total + y.detach()
        if not last:
            dist.send(y.detach().float().contiguous(), dst=rank + 1)
        inputs.append(x)
        outputs.append(y)
    forward_done()
    for x, y in zip(reversed(inputs), reversed(outputs)):
        if last:
            y.backward()
        else:
            g = torch.empty(y.shape, device=device, dtype=torch.float32)
            dist.recv(g, src=rank + 1)
            y.float().backward(g)  # g is fp32 as sent; y is too (the residual sum), .float() a no-op then
        if not first:
            dist.send(x.grad.contiguous(), dst=rank - 1)
    backward_done()
    return total


def profile_kernels(one_step, path):
    """One more step under torch.profiler (CUPTI's kernel records): per kernel name, the count
    and total GPU time in us, as JSON."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        one_step()
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = kernels.setdefault(e.name, [0, 0.0])
            k[0] += 1
            k[1] += e.device_time
    with open(path, "w") as f:
        json.dump({n: {"count": c, "us": round(t, 3)} for n, (c, t) in kernels.items()}, f)
    # The step's kernels in time (which ran beside which: NCCL's beside the backward's GEMMs).
    prof.export_chrome_trace(path + ".trace.json")


def launch_stats():
    """Under vgpu's passthrough (vgpu-run sets VGPU_LAUNCH_STATS, "%p" this process's id): a
    reader of (launches measured on the GPU, launches with a signature) so far, exact after a
    synchronization; None elsewhere. Per step, it says whether a rank still measures once the
    shapes repeat (issue 21: every measurement takes the GPU alone)."""
    path = os.environ.get("VGPU_LAUNCH_STATS", "").replace("%p", str(os.getpid()))
    if not path:
        return None

    def read():
        try:
            with open(path) as f:
                fields = dict(kv.split("=") for kv in f.readline().split())
            return int(fields["measured"]), int(fields["launches"])
        except (OSError, ValueError, KeyError):
            return None
    return read


def main():
    args = parse()
    distributed = args.mode != "single"
    if distributed:
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=device)
        rank = dist.get_rank()
    else:
        device, rank = torch.device("cuda", 0), 0
    model, opt = build(args, device)
    gen = torch.Generator(device=device).manual_seed(1234 + (0 if args.mode == "pp" else rank))
    autocast = args.mode != "fsdp2"  # FSDP2 casts through its mixed-precision policy

    def host_mark(host):
        # The host's side of each phase: the step's clock and this thread's CPU time (never
        # virtual), to tell a phase whose host is slower from one that waits longer.
        if host is not None:
            host.append((time.perf_counter(), time.thread_time()))

    def one_step(marks=None, host=None):
        idx = torch.randint(0, 50257, (args.batch, args.seq + 1), device=device, generator=gen)

        def phase_end(i):  # CUDA event i (0: start; 1, 2, 3: forward, backward, optimizer end)
            if marks:
                marks[i].record()
            host_mark(host)

        phase_end(0)
        if args.mode == "pp":
            loss = pipeline_pass(model, idx, args, device, lambda: phase_end(1), lambda: phase_end(2))
        else:
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                logits = model(idx[:, :-1])
                loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), idx[:, 1:].reshape(-1))
            phase_end(1)
            loss.backward()
            phase_end(2)
        opt.step()
        opt.zero_grad(set_to_none=True)
        phase_end(3)
        return loss

    stats = launch_stats()
    counts = []  # (measured, launches) after each warm-up and timed step, when stats is set

    def note_counts():
        if stats is not None:
            counts.append(stats() or (-1, -1))

    for _ in range(args.warmup):
        one_step()
        if stats is not None:
            torch.cuda.synchronize()
            note_counts()
    torch.cuda.synchronize()
    if args.gc_off:
        gc.collect()
        gc.freeze()
        gc.disable()
    if distributed:
        dist.barrier()
        torch.cuda.synchronize()
    steps, phases, walls, hosts, cpus, probes = [], [], [], [], [], []
    # The timed steps as a profiling range (a no-op without a profiler): under vgpu,
    # VGPU_CLOCK_REPORT then counts these steps only, without the start-up.
    torch.cuda.profiler.start()
    for _ in range(args.steps):
        probes.append(cpu_probe_ms())
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        host = []
        t0 = time.perf_counter()
        # CLOCK_TAI is never virtual under vgpu-run (the clock shim leaves it real): the wall
        # time a simulated step costs, for the simulation-speed figures (issue 21).
        w0 = time.clock_gettime(time.CLOCK_TAI)
        # The whole process's CPU time (every thread: Python, autograd, NCCL's proxy, the driver's),
        # which getrusage reports real under vgpu: with the wall time, whether a simulated rank is
        # CPU-bound or waits (issue 21's wall per step on many ranks).
        c0 = process_cpu_s()
        loss = one_step(marks, host)
        torch.cuda.synchronize()
        host_mark(host)
        steps.append((time.perf_counter() - t0) * 1e3)
        note_counts()
        walls.append((time.clock_gettime(time.CLOCK_TAI) - w0) * 1e3)
        cpus.append((process_cpu_s() - c0) * 1e3)
        phases.append([marks[i].elapsed_time(marks[i + 1]) for i in range(3)])
        # forward, backward, optimizer, the final synchronize: (step clock, thread CPU) ms each
        hosts.append([((host[i + 1][0] - host[i][0]) * 1e3, (host[i + 1][1] - host[i][1]) * 1e3) for i in range(4)])
    torch.cuda.profiler.stop()
    if args.mode == "pp":  # the loss lives on the last stage; the others' is 0
        dist.all_reduce(loss)
    final_loss = loss.item()
    if args.kernels:
        profile_kernels(one_step, args.kernels.replace("%r", str(rank)))
    med = sorted(steps)[len(steps) // 2]
    # Every rank's host side of each phase (median step clock and thread CPU, ms): which rank's host
    # sets a DDP step's pace on many virtual GPUs.
    mine = [sorted(h[i][0] for h in hosts)[len(hosts) // 2] for i in range(4)] + \
           [sorted(h[i][1] for h in hosts)[len(hosts) // 2] for i in range(4)]
    ranks_host = [mine]
    # Each step's host clock from its start until backward() returned, on this rank: in a
    # data-parallel step the slowest rank's sets when the last gradient bucket can be reduced, so
    # their spread tells what more ranks add (table.py's order-statistics prediction).
    fb = [h[0][0] + h[1][0] for h in hosts]
    ranks_fb = [fb]
    if distributed:
        gathered = torch.zeros(dist.get_world_size() * 8, device=device)
        dist.all_gather_into_tensor(gathered, torch.tensor(mine, device=device))
        g = gathered.cpu().tolist()
        ranks_host = [g[r * 8:(r + 1) * 8] for r in range(dist.get_world_size())]
        n = len(fb)
        gathered = torch.zeros(dist.get_world_size() * n, device=device)
        dist.all_gather_into_tensor(gathered, torch.tensor(fb, device=device))
        g = gathered.cpu().tolist()
        ranks_fb = [g[r * n:(r + 1) * n] for r in range(dist.get_world_size())]
    ranks_probe = [probes]
    if distributed:
        n = len(probes)
        gathered = torch.zeros(dist.get_world_size() * n, device=device)
        dist.all_gather_into_tensor(gathered, torch.tensor(probes, device=device))
        g = gathered.cpu().tolist()
        ranks_probe = [g[r * n:(r + 1) * n] for r in range(dist.get_world_size())]
    cpu_med = sorted(cpus)[len(cpus) // 2]
    ranks_cpu = [cpu_med]
    if distributed:
        gathered = torch.zeros(dist.get_world_size(), device=device)
        dist.all_gather_into_tensor(gathered, torch.tensor([cpu_med], device=device))
        ranks_cpu = gathered.cpu().tolist()
    if distributed:
        # The slowest rank's median, gathered and compared on the host: the sim backend runs no
        # kernel and its NCCL moves data for sums (not MAX), so nothing here may need either.
        every = torch.zeros(dist.get_world_size(), device=device)
        dist.all_gather_into_tensor(every, torch.tensor([med]).to(device))
        med = max(every.cpu().tolist())
    # Launches measured in each step (warm-up steps first), per rank; -1 where unknown.
    measured, last = [], 0
    for c in counts:
        measured.append(c[0] - last if c[0] >= 0 else -1)
        last = c[0] if c[0] >= 0 else last
    ranks_measured = [measured]
    if distributed and stats is not None:
        n = len(measured)
        gathered = torch.zeros(dist.get_world_size() * n, device=device)
        dist.all_gather_into_tensor(gathered, torch.tensor(measured, dtype=torch.float32, device=device))
        g = gathered.cpu().tolist()
        ranks_measured = [[int(v) for v in g[r * n:(r + 1) * n]] for r in range(dist.get_world_size())]
    if rank == 0:
        ph = [sorted(p[i] for p in phases)[len(phases) // 2] for i in range(3)]
        host_ms = [round(v, 3) for v in mine[:4]]  # rank 0's own medians, computed above
        cpu_ms = [round(v, 3) for v in mine[4:]]
        world = dist.get_world_size() if distributed else 1
        print("RESULT " + json.dumps({
            "mode": args.mode + ("+compile" if args.compile else "") + ("+gc-off" if args.gc_off else ""), "world": world,
            "layers": args.layers, "batch": args.batch, "seq": args.seq,
            "step_ms": round(med, 3), "steps_ms": [round(s, 3) for s in steps],
            "wall_ms": round(sorted(walls)[len(walls) // 2], 3),
            # per rank, the median step's CPU time of the whole process (all threads, real)
            "ranks_process_cpu_ms": [round(v, 2) for v in ranks_cpu],
            "forward_ms": round(ph[0], 3), "backward_ms": round(ph[1], 3), "optimizer_ms": round(ph[2], 3),
            # rank 0's host side of forward, backward, optimizer and the final synchronize
            "host_ms": host_ms, "thread_cpu_ms": cpu_ms,
            # per rank: [host_ms of the 4 phases, thread_cpu_ms of the 4 phases]
            "ranks_host_ms": [[round(v, 2) for v in r] for r in ranks_host],
            # per rank, per timed step: the host clock until backward() returned
            "ranks_steps_fb_ms": [[round(v, 2) for v in r] for r in ranks_fb],
            # per rank, before each timed step: thread CPU ms of a fixed Python loop (cpu_probe_ms)
            "ranks_probe_ms": [[round(v, 3) for v in r] for r in ranks_probe],
            # per rank, per step (warm-up steps first): launches measured on the GPU (under vgpu's
            # passthrough; [] elsewhere)
            "ranks_measured_per_step": ranks_measured if stats is not None else [],
            "launches_per_step": (counts[-1][1] - counts[-2][1]) if len(counts) > 1 else None,
            "loss": round(final_loss, 4)}), flush=True)
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
