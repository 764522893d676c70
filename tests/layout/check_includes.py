#!/usr/bin/env python3
"""The folders of vgpu/ are the layers of the driver (ARCHITECTURE.md): a file includes only from
its own layer or below, and never across into the other backend. This check reads every quoted
#include under vgpu/ (paths relative to vgpu/, as the build's include directory gives them) and
fails, naming file, line and rule, on an include that breaks one of the rules below.

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


def violations(vgpu_dir: pathlib.Path):
    tops = {p.name for p in vgpu_dir.iterdir() if p.is_dir()}
    for path in sorted(vgpu_dir.rglob('*')):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
            continue
        rel = path.relative_to(vgpu_dir)
        forbidden = FORBIDDEN.get(rel.parts[0], set())
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
            top = target.split('/')[0]
            if top in tops and top in forbidden:
                yield f'{rel}:{number}: includes "{match.group(1)}": {rel.parts[0]}/ must not include {top}/'


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
    if expect is not None:
        return 0 if len(found) == expect else 1
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
