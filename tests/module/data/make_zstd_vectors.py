#!/usr/bin/env python3
"""Writes the Zstandard test vectors of zstd_test.cpp (run once; the outputs are committed).

The contents come from a seeded generator that zstd_test.cpp reproduces byte for byte; the
frames come from the reference `zstd` command-line tool at several settings, so that the
decoder meets raw, RLE and compressed blocks, Huffman and FSE tables in every mode, repeat
offsets, multi-block frames, frames with and without content size and checksum."""
import subprocess
import sys
from pathlib import Path

VOCAB = [b"kernel", b"launch", b"grid", b"block", b"thread", b"warp", b"shared", b"global",
         b"param", b"const", b".reg", b".u64", b"ld.param", b"st.global", b"{", b"}", b";",
         b"\n\t", b"0x", b"%r1", b"%rd2", b"mad.lo.s32", b"bar.sync", b"ret", b"//", b"sm_90",
         b"cvta.to.global", b"setp.ge.s32", b"@%p1", b"bra", b"$L__BB0_2", b"add.s64"]


def generate(size: int, seed: int, words: bool = True) -> bytes:
    x = seed & 0x7FFFFFFF
    out = bytearray()
    while len(out) < size:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        r = x >> 16
        if not words or r % 7 == 0:
            out.append(r & 0xFF)
        else:
            out += VOCAB[r % len(VOCAB)] + b" "
    return bytes(out[:size])


# name: (size, seed, words, zstd arguments, through a pipe (no content size in the header))
VECTORS = {
    "text_small_l3": (1000, 1, True, ["-3"], False),
    "text_large_l19": (200000, 2, True, ["-19"], False),
    "text_large_l1": (140000, 3, True, ["-1"], False),
    "text_stream_nocheck": (140000, 4, True, ["-5", "--no-check"], True),
    "random_l3": (8000, 5, False, ["-3"], False),
    "zeros_l3": (200000, 0, None, ["-3"], False),
    "empty": (0, 0, True, ["-3"], False),
}


def main() -> None:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
    for name, (size, seed, words, args, piped) in VECTORS.items():
        data = bytes(size) if words is None else generate(size, seed, words)
        cmd = ["zstd", "-q", "-c"] + args
        if piped:
            frame = subprocess.run(cmd, input=data, capture_output=True, check=True).stdout
        else:
            src = out_dir / (name + ".tmp")
            src.write_bytes(data)
            frame = subprocess.run(cmd + [str(src)], capture_output=True, check=True).stdout
            src.unlink()
        (out_dir / (name + ".zst")).write_bytes(frame)
        print(f"{name}: {size} -> {len(frame)} bytes")


if __name__ == "__main__":
    main()
