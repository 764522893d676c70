"""Two sides' step times (real and vgpu, a recording and its replay) compared at the same host
state, step by step.

Why: the GPU hosts we are lent run plain Python at two speeds ~1.7x apart, switching between
steps within a run (a busy sibling hyperthread below the VM: docs/results.md, 2026-11-27g), and a
step with host-bound phases follows them on both sides. One run against one other then moves
by up to 11% with the states each happened to meet (2026-11-29b, call 2), while the steps of one
state agree within 1-2%. train_step.py times a fixed Python loop on every rank before each timed
step (its RESULT's ranks_probe_ms, one list per rank, one value per timed step).

A probe reads fast below FAST_BELOW times the least probe seen on either side, slow above
SLOW_ABOVE times it (the probes of four device calls clustered at 1.0-1.3 and 1.6-2.3 times their
least); a step is "fast" when every rank's probe reads fast, "slow" when every rank's reads slow,
else "mixed". The states are relative to the quickest probe seen: two sides that met only the
slow state read all "fast" (one state all the same).

    python3 host_states.py A.log B.log   (files holding train_step.py's RESULT lines or
                                          results.jsonl rows; A the reference)

prints the comparison by state, then by matched probes: steps in bins of 0.25 ms of their
slowest rank's probe, B's median over A's in each bin both sides have 3 steps in, weighted by the
fewer steps of the two.
"""
import json
import statistics
import sys

FAST_BELOW = 1.35
SLOW_ABOVE = 1.5
STATES = ("fast", "slow", "mixed")


def probes_of(result):
    """Per rank, one probe a timed step (ms); [] without them."""
    return result.get("ranks_probe_ms") or []


def least_probe(results):
    """The least positive probe of any rank of any result (a probe of 0 or less, a timer that did
    not run, tells no state), or None."""
    values = [p for r in results for rank in probes_of(r) for p in rank if p > 0]
    return min(values) if values else None


def step_states(result, least):
    """[(step_ms, state)] of the result's timed steps that have a probe on every rank."""
    ranks = probes_of(result)
    steps = result.get("steps_ms") or []
    if not ranks or least is None or least <= 0:
        return []
    n = min(len(r) for r in ranks)
    steps = steps[-n:] if len(steps) >= n else steps
    out = []
    for i, s in enumerate(steps):
        reads = [rank[i] / least for rank in ranks]
        if all(0 < x < FAST_BELOW for x in reads):
            state = "fast"
        elif all(x > SLOW_ABOVE for x in reads):
            state = "slow"
        else:
            state = "mixed"
        out.append((float(s), state))
    return out


def compare(a_results, b_results, least_steps=3):
    """{state or "pooled": (steps of a, median of a, steps of b, median of b, b / a or None)}: the
    steps of every run of each side together, by state; a ratio only where both sides have at
    least `least_steps` steps of that state."""
    least = least_probe(list(a_results) + list(b_results))
    a = [x for r in a_results for x in step_states(r, least)]
    b = [x for r in b_results for x in step_states(r, least)]
    out = {}
    for state in ("pooled",) + STATES:
        xa = [s for s, st in a if state == "pooled" or st == state]
        xb = [s for s, st in b if state == "pooled" or st == state]
        ma = statistics.median(xa) if xa else None
        mb = statistics.median(xb) if xb else None
        ratio = mb / ma if len(xa) >= least_steps and len(xb) >= least_steps else None
        out[state] = (len(xa), ma, len(xb), mb, ratio)
    return out


BIN_MS = 0.25


def step_probes(result):
    """[(step_ms, probe)] of the result's timed steps that have a probe on every rank: the
    slowest rank's probe (the step waits for the slowest host)."""
    ranks = probes_of(result)
    steps = result.get("steps_ms") or []
    if not ranks:
        return []
    n = min(len(r) for r in ranks)
    steps = steps[-n:] if len(steps) >= n else steps
    return [(float(s), max(rank[i] for rank in ranks)) for i, s in enumerate(steps)]


def compare_bins(a_results, b_results, width=BIN_MS, least_steps=3):
    """Steps compared at matched probes, finer than the three states: each side's steps in bins of
    `width` ms of probe, b's median over a's in every bin where both sides have at least
    `least_steps` steps, and their mean weighted by the fewer steps of the two sides.
    Returns (weighted ratio or None, bins compared, steps of a in them, steps of b in them).
    (Calls 1 and 3 of 2026-11-29c: the fast/slow/mixed states put probes of 3.1 and 3.9 ms in one
    "slow" and read 0.917; bin by bin 0.95-0.97.)"""
    bins = {}
    for side, results in ((0, a_results), (1, b_results)):
        for r in results:
            for s, p in step_probes(r):
                if p > 0:
                    bins.setdefault(round(p / width), ([], []))[side].append(s)
    total = weight = 0.0
    compared = na = nb = 0
    for xa, xb in bins.values():
        if len(xa) < least_steps or len(xb) < least_steps:
            continue
        w = min(len(xa), len(xb))
        total += w * statistics.median(xb) / statistics.median(xa)
        weight += w
        compared += 1
        na += len(xa)
        nb += len(xb)
    return (total / weight if weight else None, compared, na, nb)


def describe_bins(cmp, b_over_a="b / a", width=BIN_MS):
    ratio, bins, na, nb = cmp
    value = "-" if ratio is None else f"{ratio:.3f}"
    return f"{b_over_a} at matched probes ({width:g} ms bins): {value} over {bins} bins ({na}/{nb})"


def describe(cmp, b_over_a="b / a"):
    """One line: the pooled ratio and each state's (steps on each side in brackets)."""
    parts = []
    for state in ("pooled",) + STATES:
        na, _, nb, _, ratio = cmp[state]
        value = "-" if ratio is None else f"{ratio:.3f}"
        parts.append(f"{state} {value} ({na}/{nb})")
    return f"{b_over_a} by host state: " + ", ".join(parts)


def results_in(path):
    """train_step.py's RESULT dicts in a log, or the rows of a results.jsonl that carry steps."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("RESULT "):
                out.append(json.loads(line[7:]))
            elif line.startswith("{"):
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "steps_ms" in row:
                    out.append(row)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = results_in(sys.argv[1]), results_in(sys.argv[2])
    print(describe(compare(a, b), "B / A"))
    print(describe_bins(compare_bins(a, b), "B / A"))
