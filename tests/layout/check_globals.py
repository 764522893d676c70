#!/usr/bin/env python3
"""One root object per backend (ARCHITECTURE.md): the passthrough's process state belongs to
`Passthrough` (vgpu/passthrough/passthrough.h), not to process-wide variables scattered over its
files. This check reads every source file of a backend folder and fails, naming file and line, on
process-wide mutable state outside the root: a namespace-scope variable that is neither const nor
thread_local, or a function-local `static` that is not const (`static std::mutex mu;`,
`static Foo* x = new Foo;`). Immutable caches (`static const`, `static constexpr`) and per-thread
state (`thread_local`) pass.

Usage: check_globals.py BACKEND_DIR [--expect N]
  --expect N: succeed only when exactly N lines break the rule (the check's own test, on a
              fixture folder with known globals, so that a check that finds nothing fails).
"""
import pathlib
import re
import sys

# Files whose globals are known and have an owner elsewhere, with why they are still there.
# Each entry is work left for issue 20: move the state into the root, then drop the entry.
ALLOWED = {
    'passthrough.cpp': 'the root itself (one pointer, made on first use, never destroyed)',
    'thread_clock.cpp': "per-thread clocks and the NCCL horizon: the timing model's step (the lead's)",
    'nccl_timing.cpp': "the NCCL timing tables: the driver <-> plugin contract's step ('contract')",
    'timeline_writer.cpp': 'the VGPU_TIMELINE writer (the lead\'s)',
    'array_api.cpp': "the CUDA arrays' charges: the array-size rule's step ('arrays')",
}
SOURCE_SUFFIXES = {'.h', '.cpp'}
# Function-local or class-scope statics: a variable (no '(' before its '=' or ';'), not const.
LOCAL_STATIC = re.compile(r'^\s+static\s+(?!const\b|constexpr\b|inline\s+const)([^(=;]*)(=|;|\{)')
# Namespace-scope declarations start in column 0; these starts are never mutable variables.
NOT_A_VARIABLE = re.compile(
    r'^(#|//|/\*|\*|}|namespace\b|using\b|template\b|typedef\b|struct\b|class\b|enum\b|union\b|'
    r'static_assert\b|extern\b|const\b|constexpr\b|inline\s+constexpr\b|static\s+const\b|'
    r'static\s+constexpr\b|thread_local\b|static\s+thread_local\b|friend\b|return\b|public:|private:|'
    r'protected:|VGPU_|[A-Z_]+\()')


def code(line: str) -> str:
    return line.split('//', 1)[0].rstrip()


def globals_in(path: pathlib.Path):
    depth = 0  # brace depth outside namespaces: > 0 inside a function or class body
    in_namespace = []  # stack: True for a namespace brace
    for number, raw in enumerate(path.read_text(errors='replace').splitlines(), 1):
        line = code(raw)
        inside_body = any(not ns for ns in in_namespace)
        if inside_body and LOCAL_STATIC.match(line):
            yield number, raw.strip()
        elif not inside_body and line and not line[0].isspace() and not NOT_A_VARIABLE.match(line):
            head = line.split('=', 1)[0]
            if (line.endswith(';') or line.endswith('{};') or ('=' in line and line.endswith('{'))) and \
                    '(' not in head and not head.rstrip().endswith(')'):
                yield number, raw.strip()
        for ch in line:
            if ch == '{':
                in_namespace.append(bool(re.match(r'^\s*(inline\s+)?namespace\b', line)) and
                                    line.rstrip().endswith('{'))
            elif ch == '}' and in_namespace:
                in_namespace.pop()


def main() -> int:
    args = sys.argv[1:]
    expect = None
    if '--expect' in args:
        i = args.index('--expect')
        expect = int(args[i + 1])
        del args[i:i + 2]
    root = pathlib.Path(args[0])
    found = []
    for path in sorted(root.iterdir()):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file() or path.name in ALLOWED:
            continue
        for number, text in globals_in(path):
            found.append(f'{path.name}:{number}: process-wide mutable state outside the root: {text}')
    for f in found:
        print(f)
    if expect is not None:
        if len(found) != expect:
            print(f'FAIL expected {expect} globals, found {len(found)}')
            return 1
        return 0
    if found:
        print(f'FAIL {len(found)} globals: make them members of the backend root (passthrough.h)')
        return 1
    print(f'ok: no process-wide mutable state outside the root in {root} '
          f'(known and owned elsewhere: {", ".join(sorted(ALLOWED))})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
