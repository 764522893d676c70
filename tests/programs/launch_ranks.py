#!/usr/bin/env python3
"""Starts one process per rank as torchrun does (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
GROUP_RANK, MASTER_ADDR/PORT set for each), on one host, and waits for them all. The first rank
to fail stops the others (torchrun's behaviour), so a broken job cannot hang.

Usage: launch_ranks.py --nproc-per-node N [--nnodes K --node-rank I] [--timeout S] -- PROGRAM [ARGS...]
With --nnodes, this is node I's launcher of a job of K x N ranks (torchrun's agent of one node):
its ranks are I x N .. I x N + N - 1, local ranks 0..N-1.
Each rank's output lines are printed as they come (prefixed by nothing: the program tags them).
Exits with 0 when every rank did, else with the first failing rank's status (124 on timeout).
"""
import argparse
import os
import selectors
import signal
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nproc-per-node", type=int, required=True)
    ap.add_argument("--nnodes", type=int, default=1)
    ap.add_argument("--node-rank", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=0, help="seconds (0: none)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd or a.nproc_per_node < 1 or not 0 <= a.node_rank < a.nnodes:
        ap.error("a command, --nproc-per-node >= 1 and 0 <= --node-rank < --nnodes are needed")
    n = a.nproc_per_node
    procs = []
    sel = selectors.DefaultSelector()
    for r in range(n):
        env = dict(os.environ, RANK=str(a.node_rank * n + r), WORLD_SIZE=str(a.nnodes * n), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(n), GROUP_RANK=str(a.node_rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=os.environ.get("MASTER_PORT", "29500"))
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=False)
        sel.register(p.stdout, selectors.EVENT_READ, p)
        procs.append(p)
    deadline = time.monotonic() + a.timeout if a.timeout > 0 else None
    status = 0
    open_pipes = n
    while open_pipes > 0:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if left == 0.0:
            print(f"launch_ranks: timeout after {a.timeout} s: stopping every rank", flush=True)
            status = status or 124
            break
        for key, _ in sel.select(timeout=left if left is not None else 1.0):
            line = key.fileobj.readline()
            if not line:
                sel.unregister(key.fileobj)
                open_pipes -= 1
                continue
            sys.stdout.write(line.decode(errors="replace"))
        sys.stdout.flush()
        for p in procs:
            rc = p.poll()
            if rc not in (None, 0) and status == 0:
                print(f"launch_ranks: rank {procs.index(p)} exited with {rc}: stopping the others", flush=True)
                status = rc if rc > 0 else 128 - rc
        if status != 0:
            break
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM if status == 0 else signal.SIGKILL)
    for p in procs:
        rc = p.wait()
        if rc != 0 and status == 0:
            status = rc if rc > 0 else 128 - rc
    return status


if __name__ == "__main__":
    sys.exit(main())
