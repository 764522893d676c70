#!/usr/bin/env python3
"""The folders of vgpu/ are the layers of the driver (ARCHITECTURE.md): a file includes only from
its own layer or below, and never across into the other backend. This check reads every quoted
#include under vgpu/ (paths relative to vgpu/, as the build's include directory gives them) and
fails, naming file, line and rule, on an include that breaks one of the rules below.

The sim backend's folders (sim/core, sim/memory, sim/exec, sim/darkapi, any other folder of
sim/) are layers too: their includes of one another form no cycle. Each cycle counts once, named
with one include of each of its steps.

Usage: check_includes.py VGPU_DIR [--expect N]
  --expect N: succeed only when exactly N includes break the rules (the check's own test, on a
              fixture tree with known bad includes, so that a check that finds nothing fails).
"""
import pathlib
import re
import sys

# Folder of the including file -> top folders of vgpu/ it must not include from.
BACKENDS = {'sim', 'passthrough'}
FORBIDDEN = {
    'common': {'contracts', 'status', 'module', 'timing', 'front'} | BACKENDS,
    'contracts': {'common', 'status', 'module', 'timing', 'front'} | BACKENDS,
    'timing': {'front'} | BACKENDS,
    'front': BACKENDS,
    'status': {'front', 'timing'} | BACKENDS,
    'module': {'front', 'timing'} | BACKENDS,
    'passthrough': {'sim'},
    'sim': {'passthrough'},
    'nvml': BACKENDS,
    'vclock': BACKENDS,
    'tools': BACKENDS,
}
SOURCE_SUFFIXES = {'.h', '.hpp', '.cpp', '.cc', '.c', '.cu', '.inc'}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


# The folder whose subfolders must not include one another in a cycle.
CYCLE_FREE = 'sim'


def includes(vgpu_dir: pathlib.Path):
    """(file relative to vgpu/, line number, include as written, target relative to vgpu/)."""
    for path in sorted(vgpu_dir.rglob('*')):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(vgpu_dir)
        for number, line in enumerate(path.read_text(errors='replace').splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1)
            # A path that climbs out of its folder is resolved against the including file.
            if target.startswith('..'):
                resolved = (path.parent / target).resolve()
                try:
                    target = str(resolved.relative_to(vgpu_dir.resolve()))
                except ValueError:
                    continue  # outside vgpu/: another project's header
            yield rel, number, match.group(1), target


def violations(vgpu_dir: pathlib.Path):
    tops = {p.name for p in vgpu_dir.iterdir() if p.is_dir()}
    for rel, number, written, target in includes(vgpu_dir):
        forbidden = FORBIDDEN.get(rel.parts[0], set())
        top = target.split('/')[0]
        if top in tops and top in forbidden:
            yield f'{rel}:{number}: includes "{written}": {rel.parts[0]}/ must not include {top}/'


def cycles(vgpu_dir: pathlib.Path):
    """One line per cycle of includes between the subfolders of CYCLE_FREE."""
    root = vgpu_dir / CYCLE_FREE
    if not root.is_dir():
        return
    folders = {p.name for p in root.iterdir() if p.is_dir()}
    edges = {}  # (from folder, to folder) -> the first include that makes the step
    for rel, number, written, target in includes(vgpu_dir):
        parts = pathlib.PurePosixPath(target).parts
        if len(rel.parts) < 3 or rel.parts[0] != CYCLE_FREE or len(parts) < 3 or parts[0] != CYCLE_FREE:
            continue
        source, dest = rel.parts[1], parts[1]
        if source != dest and source in folders and dest in folders:
            edges.setdefault((source, dest), f'{rel}:{number} includes "{written}"')

    def reachable(start):
        seen, stack = set(), [start]
        while stack:
            for (a, b) in edges:
                if a == stack[-1] and b not in seen:
                    seen.add(b)
                    stack.append(b)
                    break
            else:
                stack.pop()
        return seen

    reach = {f: reachable(f) for f in folders}
    done = set()
    for folder in sorted(folders):
        if folder in done or folder not in reach[folder]:
            continue
        # The folders on a cycle with this one: each reaches the other.
        members = sorted(f for f in folders if f in reach[folder] and folder in reach[f])
        done.update(members)
        steps = '; '.join(edges[e] for e in sorted(edges) if e[0] in members and e[1] in members)
        names = ', '.join(f'{CYCLE_FREE}/{m}/' for m in members)
        yield f'{names} include one another in a cycle: {steps}'


def main() -> int:
    args = sys.argv[1:]
    expect = None
    if len(args) == 3 and args[1] == '--expect' and args[2].isdigit():
        expect = int(args[2])
        args = args[:1]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    vgpu_dir = pathlib.Path(args[0])
    if not (vgpu_dir / 'front').is_dir():
        print(f'{vgpu_dir}: not the vgpu/ folder (no front/)', file=sys.stderr)
        return 2
    found = list(violations(vgpu_dir))
    for v in found:
        print(v)
    print(f'{len(found)} include(s) crossing layers')
    found_cycles = list(cycles(vgpu_dir))
    for c in found_cycles:
        print(c)
    print(f'{len(found_cycles)} cycle(s) between the folders of {CYCLE_FREE}/')
    found += found_cycles
    if expect is not None:
        return 0 if len(found) == expect else 1
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
