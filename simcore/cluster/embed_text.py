#!/usr/bin/env python3
"""Compiles a text file into a C++ source as a function returning std::string_view, so that the
shipped example file and the library's built-in copy are one file.

usage: embed_text.py INPUT OUTPUT.cpp NAMESPACE FUNCTION
"""
import sys


def c_literal(line: str) -> str:
    out = []
    for byte in line.encode("utf-8"):
        ch = chr(byte)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= byte < 127:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")  # octal escapes never swallow the next character
    return '"' + "".join(out) + '"'


def main(src: str, dst: str, namespace: str, function: str) -> int:
    with open(src, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    body = "\n".join("      " + c_literal(line) for line in lines) or '      ""'
    with open(dst, "w", encoding="utf-8") as f:
        f.write(f"// Generated from {src} by embed_text.py; do not edit.\n"
                "#include <string_view>\n\n"
                f"namespace {namespace} {{\n"
                f"std::string_view {function}() {{\n"
                "  static constexpr char kText[] =\n"
                f"{body};\n"
                "  return {kText, sizeof kText - 1};\n"
                "}\n"
                f"}}  // namespace {namespace}\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
