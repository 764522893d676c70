#!/usr/bin/env python3
"""Generate the driver surface of libcuda.so.1 from the CUDA toolkit's own files.

Inputs (all from the toolkit, nothing hand-maintained):
  * the stub libcuda.so: the exact set of symbols the real driver exports;
  * cudaTypedefs.h (+ the profiler/GL/EGL/VDPAU typedef headers): one `PFN_<api>_v<version>`
    typedef per ABI of every entry point, with its parameter list, and `_ptds`/`_ptsz` for the
    per-thread-default-stream variants.

The one fact the headers do not state is which exported symbol (`cuCtxCreate`, `_v2`, `_v3`,
`_v4`) implements which typedef version. The driver's convention is that successive ABI
versions of one API are exported as `api`, `api_v2`, `api_v3`, ... in version order, so the
versions are matched to the symbols in order. tests/driver/proc_address_test checks the result
against every answer recorded from a real 580-series driver.

Outputs:
  entries.inc     X-macro list: VGPU_ENTRY(symbol, (params), (args)) for every exported symbol,
                  VGPU_INTEROP_ENTRY(symbol) for the graphics interop entry points the real
                  driver exports but the stub does not (their types need GL/EGL/VDPAU headers),
                  VGPU_HIDDEN_ENTRY(symbol) for what cuGetProcAddress serves but no Linux
                  driver exports (cuWGL*).
  proc_table.inc  {api, version, per_thread, symbol} rows for cuGetProcAddress, sorted by api
                  then version.
  driver.map      the linker version script: the stub's symbols and the interop ones, nothing else.
  entry_renames.h declares vgpu_impl_<symbol> and #defines <symbol> as it, for every exported
                  symbol (see front/driver/checked_entries.cpp).
  errors.inc      {code, "NAME", "description"} for every CUresult, the description being the
                  first sentence of cuda.h's own comment on that code.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

TYPEDEF_RE = re.compile(
    r'typedef\s+CUresult\s*\(\s*CUDAAPI\s*\*\s*PFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?\)\((.*)\);')
SUFFIX_RE = re.compile(r'^(cu\w+?)(?:_v(\d+))?(_ptds|_ptsz)?$')
INTEROP_HEADERS = ('cudaProfilerTypedefs.h', 'cudaGLTypedefs.h', 'cudaEGLTypedefs.h',
                   'cudaVDPAUTypedefs.h')
# Parameter types that only the graphics headers define: the stubs for these never need them.
FOREIGN_TYPE_RE = re.compile(r'\b(GL\w+|EGL\w+|Vdp\w+|CUeglFrame\w*|CUeglStreamConnection)\b')


def exported_symbols(stub: Path) -> list[str]:
    out = subprocess.run(['nm', '-D', '--defined-only', str(stub)], check=True,
                         capture_output=True, text=True).stdout
    syms = sorted({line.split()[-1] for line in out.splitlines() if ' T ' in line})
    if len(syms) < 100:
        sys.exit(f'{stub}: only {len(syms)} exported functions, not a driver stub')
    return syms


def read_typedefs(include: Path):
    """{(api, version, flavor): params} with flavor '' / '_ptds' / '_ptsz'."""
    found = {}
    for name in ('cudaTypedefs.h',) + INTEROP_HEADERS:
        path = include / name
        if not path.exists():
            continue
        for m in TYPEDEF_RE.finditer(path.read_text()):
            api, version, flavor, params = m.group(1), int(m.group(2)), m.group(3) or '', m.group(4)
            found[(api, version, flavor)] = params.strip()
    return found


DEVICE_PARAM_RE = re.compile(r'^\s*CUdevice(_v1)?\s+\w+\s*$')
CONTEXT_PARAM_RE = re.compile(r'^\s*CUcontext\s+\w+\s*$')


def split_symbol(sym: str):
    """cuCtxCreate_v4 -> ('cuCtxCreate', 4, ''); cuMemcpy_ptds -> ('cuMemcpy', 1, '_ptds')."""
    m = SUFFIX_RE.match(sym)
    # Names that end in _v<digits> as part of the API name itself do not occur in CUDA 13.
    return m.group(1), int(m.group(2) or 1), m.group(3) or ''


def param_names(params: str) -> list[str]:
    if params in ('', 'void'):
        return []
    names = []
    for p in split_top_level(params):
        p = re.sub(r'\[.*?\]', '', p).strip()
        m = re.search(r'(\w+)\s*$', p)
        names.append(m.group(1))
    return names


def split_top_level(params: str) -> list[str]:
    parts, depth, cur = [], 0, ''
    for ch in params:
        if ch == '(':
            depth += 1
        elif ch == ')':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]


def build(stub: Path, include: Path):
    symbols = exported_symbols(stub)
    typedefs = read_typedefs(include)

    # Group exported symbols and typedef versions per (api, flavor) and match them in order.
    symbols_by_key = {}
    for sym in symbols:
        api, ordinal, flavor = split_symbol(sym)
        symbols_by_key.setdefault((api, flavor), []).append((ordinal, sym))
    versions_by_key = {}
    for (api, version, flavor) in typedefs:
        versions_by_key.setdefault((api, flavor), []).append(version)

    signature = {}      # symbol -> params
    proc_rows = []      # (api, version, per_thread, symbol)
    problems = []
    for key, syms in sorted(symbols_by_key.items()):
        api, flavor = key
        syms = [s for _, s in sorted(syms)]
        versions = sorted(versions_by_key.get(key, []))
        if not versions:
            continue  # exported, but no typedef: not resolvable through cuGetProcAddress
        if len(versions) != len(syms):
            problems.append(f'{api}{flavor}: versions {versions} vs symbols {syms}')
            # Keep the newest ones aligned: the newest typedef is the newest symbol.
            n = min(len(versions), len(syms))
            versions, syms = versions[-n:], syms[-n:]
        for version, sym in zip(versions, syms):
            signature[sym] = typedefs[(api, version, flavor)]
            proc_rows.append((api, version, 1 if flavor else 0, sym))

    # Entry points the real driver exports and serves through cuGetProcAddress without the stub
    # exporting them (graphics interop: GL, EGL, VDPAU). They are named as the real driver names
    # them: successive ABI versions api, api_v2, ...; a per-thread variant is the default-stream
    # symbol in force at its version plus the suffix (cuGLMapBufferObject_v2_ptds). Exported
    # (VGPU_INTEROP_ENTRY) except what only Windows drivers have (cuWGL*: VGPU_HIDDEN_ENTRY).
    interop = {}  # (api, version, flavor) -> symbol
    for (api, flavor), versions in sorted(versions_by_key.items(), key=lambda kv: kv[0][1]):
        if (api, flavor) in symbols_by_key:
            continue
        for i, version in enumerate(sorted(versions)):
            if not flavor:
                sym = api + (f'_v{i + 1}' if i else '')
            else:
                base = [interop[(api, v, '')] for v in sorted(versions_by_key.get((api, ''), []))
                        if v <= version and (api, v, '') in interop]
                sym = (base[-1] if base else api) + flavor
            interop[(api, version, flavor)] = sym
            proc_rows.append((api, version, 1 if flavor else 0, sym))
    hidden = sorted(set(interop.values()))
    interop_exports = [sym for sym in hidden if not sym.startswith('cuWGL')]

    entries = [f'VGPU_INTEROP_ENTRY({sym})' if sym in interop_exports else f'VGPU_HIDDEN_ENTRY({sym})'
               for sym in hidden]
    for sym in symbols:
        params = signature.get(sym)
        if params is None or FOREIGN_TYPE_RE.search(params):
            sys.exit(f'{sym}: exported by the stub but no usable typedef ({params})')
        else:
            args = ', '.join(param_names(params))
            # The same arguments with every device ordinal and every context passed by value
            # marked, so that a backend forwarding the call to a real driver can translate
            # virtual to physical, and the program's context handles to the real driver's.
            def marked(p, n):
                if DEVICE_PARAM_RE.match(p):
                    return f'VGPU_DEV({n})'
                return f'VGPU_CTX({n})' if CONTEXT_PARAM_RE.match(p) else n
            fwd = ', '.join(marked(p, n) for p, n in zip(split_top_level(params), param_names(params)))
            entries.append(f'VGPU_ENTRY({sym}, ({params}), ({args}), ({fwd}))')
    proc_rows.sort()
    return symbols + interop_exports, entries, proc_rows, problems, signature


ERROR_ENUM_RE = re.compile(r'typedef enum cudaError_enum \{(.*?)\} CUresult;', re.S)
ERROR_ITEM_RE = re.compile(r'/\*\*(.*?)\*/\s*(CUDA_\w+)\s*=\s*(\d+)', re.S)


def read_errors(include: Path) -> list[tuple[int, str, str]]:
    body = ERROR_ENUM_RE.search((include / 'cuda.h').read_text()).group(1)
    errors = []
    for comment, name, code in ERROR_ITEM_RE.findall(body):
        text = ' '.join(line.strip().lstrip('*').strip() for line in comment.splitlines())
        text = re.sub(r'\s+', ' ', text.replace('::', '')).strip()
        first = re.split(r'(?<=[a-z0-9\)])\.\s', text + ' ')[0].rstrip('. ')
        errors.append((int(code), name, first.replace('\\', '\\\\').replace('"', '\\"')))
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--stub', required=True, type=Path)
    ap.add_argument('--include', required=True, type=Path)
    ap.add_argument('--out-dir', required=True, type=Path)
    ap.add_argument('--report', action='store_true', help='print the matching problems')
    a = ap.parse_args()
    symbols, entries, proc_rows, problems, signature = build(a.stub, a.include)
    if a.report:
        print('\n'.join(problems) or 'no problems')
    header = '// Generated by vgpu/front/gen/gen_driver_surface.py from the CUDA toolkit. Do not edit.\n'
    a.out_dir.mkdir(parents=True, exist_ok=True)
    (a.out_dir / 'entries.inc').write_text(header + '\n'.join(entries) + '\n')
    (a.out_dir / 'proc_table.inc').write_text(header + ''.join(
        f'{{"{api}", {version}, {pt}, reinterpret_cast<void*>(&{sym})}},\n'
        for api, version, pt, sym in proc_rows))
    (a.out_dir / 'errors.inc').write_text(header + ''.join(
        f'{{static_cast<CUresult>({code}), "{name}", "{text}"}},\n'
        for code, name, text in read_errors(a.include)))
    # The sim backend's implementations are compiled as vgpu_impl_<symbol> (front/driver/cuda_api.h
    # includes entry_renames.h after cuda.h); front/driver/checked_entries.cpp defines each exported
    # symbol over its implementation and gives every error return its log line.
    exported = [sym for sym in symbols if signature.get(sym) is not None]
    (a.out_dir / 'entry_renames.h').write_text(
        header + '#pragma once\n'
        + '#define VGPU_HIDDEN_ENTRY(sym)\n#define VGPU_INTEROP_ENTRY(sym)\n'
        + '#define VGPU_ENTRY(sym, params, args, forwarded) '
          'extern "C" CUresult CUDAAPI vgpu_impl_##sym params;\n'
        + '#include "entries.inc"\n#undef VGPU_ENTRY\n#undef VGPU_HIDDEN_ENTRY\n#undef VGPU_INTEROP_ENTRY\n'
        + ''.join(f'#define {s} vgpu_impl_{s}\n' for s in exported))
    (a.out_dir / 'driver.map').write_text(
        '/* Generated: the symbols of the toolkit\'s stub libcuda.so and the graphics interop ones. */\n{\n  global:\n'
        + ''.join(f'    {s};\n' for s in symbols) + '  local:\n    *;\n};\n')


if __name__ == '__main__':
    main()
