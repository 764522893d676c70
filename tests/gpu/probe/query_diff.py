"""Compares two VGPU_QUERY_TRACE files (the passthrough's: the real driver's answers, and the sim
backend's), and optionally the kernels each run launched (two VGPU_TIMELINE files):

    query_diff.py A.queries B.queries [A.timeline.json B.timeline.json] [--show N]

Prints, most telling first:
1. the same question answered differently: lines whose part before " -> " (the call and its
   arguments) appears in both files with a different answer;
2. the first line where the two traces part, in order, with the lines before it;
3. the questions only one side asked (sorted unique lines, per entry point counted, then the
   first N of each);
4. the kernels only one side launched (names and launch counts), then every kernel of each.
"""
import collections
import json
import sys


def read(path):
    with open(path, errors="replace") as f:
        return [l.rstrip("\n") for l in f if l.strip()]


def split(line):
    q, sep, a = line.partition(" -> ")
    return q, a if sep else ""


def api(line):
    return line.split(" ", 1)[0]


# Timeline tasks that are not kernels (the two backends label copies and markers differently).
NOT_KERNELS = ("copy ", "memcpy", "memset", "event record", "op")


def kernels(path):
    with open(path) as f:
        events = json.load(f).get("traceEvents", [])
    count = collections.Counter()
    for e in events:
        name = e.get("name", "?")
        if e.get("ph") == "X" and e.get("cat") == "task" and not (name == "op" or name.startswith(NOT_KERNELS[:-1])):
            count[name] += 1
    return count


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show = 40
    if "--show" in sys.argv:
        show = int(sys.argv[sys.argv.index("--show") + 1])
        args.remove(str(show))
    a_path, b_path = args[0], args[1]
    a, b = read(a_path), read(b_path)
    print(f"A {a_path}: {len(a)} lines, {len(set(a))} unique")
    print(f"B {b_path}: {len(b)} lines, {len(set(b))} unique")

    answers_a, answers_b = collections.defaultdict(set), collections.defaultdict(set)
    for line in a:
        q, ans = split(line)
        answers_a[q].add(ans)
    for line in b:
        q, ans = split(line)
        answers_b[q].add(ans)
    differ = sorted(q for q in answers_a.keys() & answers_b.keys() if answers_a[q] != answers_b[q])
    print(f"\n== 1. the same question, different answers: {len(differ)}")
    for q in differ[:show]:
        print(f"  {q}\n    A -> {' | '.join(sorted(answers_a[q]))}\n    B -> {' | '.join(sorted(answers_b[q]))}")

    print("\n== 2. first line where the traces part (in order)")
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), None)
    if i is None and len(a) == len(b):
        print("  none: the traces are identical")
    else:
        i = min(len(a), len(b)) if i is None else i
        for k in range(max(0, i - 3), i):
            print(f"  = {a[k]}")
        print(f"  line {i + 1}:\n  A {a[i] if i < len(a) else '(end)'}\n  B {b[i] if i < len(b) else '(end)'}")

    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    print(f"\n== 3. lines only in A: {len(only_a)}, only in B: {len(only_b)}")
    for side, lines in (("A", only_a), ("B", only_b)):
        per_api = collections.Counter(api(l) for l in lines)
        print(f"  only {side} by entry point: " + ", ".join(f"{k} {v}" for k, v in per_api.most_common()))
    for side, lines in (("A", only_a), ("B", only_b)):
        for l in lines[:show]:
            print(f"  {side}< {l[:400]}")
        if len(lines) > show:
            print(f"  {side}< ... {len(lines) - show} more")

    if len(args) >= 4:
        ka, kb = kernels(args[2]), kernels(args[3])
        print(f"\n== 4. kernels (copies and markers left out): A launched {sum(ka.values())} ({len(ka)} names), B {sum(kb.values())} ({len(kb)} names)")
        for side, mine, other in (("A", ka, kb), ("B", kb, ka)):
            for name in sorted(set(mine) - set(other)):
                print(f"  only {side}: {mine[name]:5d} x {name[:300]}")
        for side, mine in (("A", ka), ("B", kb)):
            print(f"  every kernel {side} launched:")
            for name, n in mine.most_common(show):
                print(f"    {n:5d} x {name[:300]}")


if __name__ == "__main__":
    main()
