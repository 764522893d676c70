"""The summary vgpu-run prints on stderr when the command has finished."""

_MAX_ROWS = 16  # past this many devices, only the ones the job used are listed


def _plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def exit_text(status):
    return f"signal {status - 128}" if status > 128 else f"exit status {status}"


def render(job, backend, cluster, status, wall_s, rows, notes, sample_interval_s):
    """The lines of the summary (without a trailing newline)."""
    out = [f"== vgpu-run: job {job}, backend {backend}, {len(cluster.devices)} x {cluster.model} "
           f"({_plural(cluster.nodes, 'node')} x {cluster.gpus_per_node}), "
           f"command ended with {exit_text(status)}"]
    if rows is None:
        out.append(f"   wall time {wall_s:.3f} s; no process of the job used the virtual GPUs "
                   "(no status region appeared)")
    else:
        virtual = max((r["clock_s"] for r in rows), default=0.0)
        if virtual > 0:
            out.append(f"   wall time {wall_s:.3f} s, virtual time {virtual:.6f} s "
                       "(the furthest device clock)")
        else:
            out.append(f"   wall time {wall_s:.3f} s, virtual time not reported (no device "
                       "advanced its virtual clock in the status region)")
        used = [r for r in rows if r["clock_s"] > 0 or r["kernels"] or r["memory_peak_mib"]]
        shown = rows if len(rows) <= _MAX_ROWS else used
        out.append("   GPU  memory peak   virtual clock      busy    util  kernels")
        for r in shown:
            out.append(f"   {r['index']:>3}  {r['memory_peak_mib']:>7} MiB  {r['clock_s']:>12.6f} s"
                       f"  {r['busy_s']:>10.6f} s  {r['utilization']:>3} %  {r['kernels']:>7}")
        if len(shown) < len(rows):
            out.append(f"   ({len(rows) - len(shown)} other GPUs not used)")
        out.append(f"   memory peak: the highest memory.used sampled every {sample_interval_s:g} s "
                   "(vgpu-smi); busy, util and kernels as vgpu-smi reports them")
    out += [f"   {n}" for n in notes]
    return "\n".join(out)
