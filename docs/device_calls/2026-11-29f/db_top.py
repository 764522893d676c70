#!/usr/bin/env python3
"""The kernel-time databases of one call side by side: the longest rows of the first database
(by exact signature) and what each other database holds for the same signature, and each
database's sum over the signatures all of them hold. Usage: db_top.py NAME=DB ... [--top N]"""
import sqlite3
import sys

args = [a for a in sys.argv[1:] if not a.startswith("--top")]
top = int(next((a.split("=")[1] for a in sys.argv[1:] if a.startswith("--top=")), 15))
dbs = []
for a in args:
    name, path = a.split("=", 1)
    try:
        rows = sqlite3.connect(path).execute("SELECT signature, kernel_name, duration_ns FROM kernel_times").fetchall()
    except sqlite3.Error as e:
        print(f"{name}: {e}")
        rows = []
    dbs.append((name, {sig: (k, ns) for sig, k, ns in rows}))
    print(f"{name}: {len(rows)} rows, {sum(ns for _, _, ns in rows) / 1e3:.1f} us over all rows")
if not dbs:
    sys.exit(0)
base_name, base = dbs[0]
print(f"\nlongest rows of {base_name} (us): " + " | ".join(n for n, _ in dbs))
for sig, (k, ns) in sorted(base.items(), key=lambda kv: -kv[1][1])[:top]:
    cells = [f"{d[sig][1] / 1e3:9.1f}" if sig in d else "        -" for _, d in dbs]
    print(" | ".join(cells) + "  " + k[:90])
common = set(base)
for _, d in dbs[1:]:
    common &= set(d)
print(f"\nsignatures in every database: {len(common)}; their sums (us): " +
      ", ".join(f"{n} {sum(d[s][1] for s in common) / 1e3:.1f}" for n, d in dbs))
