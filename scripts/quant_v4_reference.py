#!/usr/bin/env python3
"""Independent transcription of the TQTC version 4 decoder (docs/formats/quant.md §11)
in numpy, f32 after every operation. Writes tests/fixtures/quant/v4_golden.hex: segments
built field by field from the spec (not by tensorvault's encoder) and the f32 bits this
decoder gives for them; `segment_v4_tests.rs` checks that the Rust decoder agrees.

    python3 scripts/quant_v4_reference.py            # rewrite the fixture
    python3 scripts/quant_v4_reference.py --check    # compare with the committed one
"""
import struct
import sys
from pathlib import Path

import numpy as np

MAGIC = b"TQTC\r\n\x1a\n"
HEADER = 24
M64 = (1 << 64) - 1


def splitmix64(seed, i):
    z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def pack(codes, bits):
    """LSB-first bit stream (§2)."""
    acc = 0
    for i, c in enumerate(codes):
        acc |= int(c) << (i * bits)
    return acc.to_bytes((len(codes) * bits + 7) // 8, "little")


def unpack(b, bits, n):
    acc = int.from_bytes(b, "little")
    return [(acc >> (i * bits)) & ((1 << bits) - 1) for i in range(n)]


def f16(bits):
    return np.frombuffer(struct.pack("<H", bits), np.float16)[0].astype(np.float32)


def inverse_rotation(y, seed):
    s = len(y)
    v = (y * np.float32(1.0 / np.sqrt(np.float64(s)))).astype(np.float32)
    h = 1
    while h < s:
        v = v.reshape(-1, 2, h)
        a, b = v[:, 0, :].copy(), v[:, 1, :].copy()
        v = np.stack([a + b, a - b], axis=1).astype(np.float32).reshape(-1)
        h *= 2
    for i in range(s):
        if (splitmix64(seed, i // 64) >> (i % 64)) & 1:
            v[i] = -v[i]
    return v


def decode(seg):
    assert seg[:8] == MAGIC and seg[8] == 4
    bits, glog, slog = seg[9], seg[10], seg[11]
    (n,) = struct.unpack_from("<I", seg, 12)
    sbits, mbits, flags = seg[16], seg[17], seg[18]
    (seed,) = struct.unpack_from("<I", seg, 20)
    g, s = 1 << glog, 1 << slog
    supers, groups = -(-n // s), -(-n // g)
    o = HEADER
    units = [struct.unpack_from("<HH", seg, o + 4 * i) for i in range(supers)]
    o += 4 * supers
    ls = (groups * sbits + 7) // 8
    sc = unpack(seg[o:o + ls], sbits, groups)
    o += ls
    lm = (groups * mbits + 7) // 8
    mc = unpack(seg[o:o + lm], mbits, groups)
    o += lm
    codes = unpack(seg[o:], bits, n)
    assert o + (n * bits + 7) // 8 == len(seg)
    out = np.zeros(n, np.float32)
    for k in range(groups):
        d, m = (f16(u) for u in units[k * g // s])
        gmin = np.float32(m * np.float32(mc[k]))
        gscale = np.float32(d * np.float32(sc[k]))
        for i in range(k * g, min(n, (k + 1) * g)):
            out[i] = np.float32(gmin + np.float32(gscale * np.float32(codes[i])))
    if flags & 1:
        for si in range(n // s):
            out[si * s:(si + 1) * s] = inverse_rotation(out[si * s:(si + 1) * s], seed)
    return out


def segment(bits, glog, slog, n, sbits, mbits, flags, seed, units, sc, mc, codes):
    h = MAGIC + bytes([4, bits, glog, slog]) + struct.pack("<I", n)
    h += bytes([sbits, mbits, flags, 0]) + struct.pack("<I", seed)
    body = b"".join(struct.pack("<HH", d, m) for d, m in units)
    return h + body + pack(sc, sbits) + pack(mc, mbits) + pack(codes, bits)


def cases():
    # 1. 3-bit codes, groups of 4 in super-blocks of 8, 10 values (a partial super-block
    #    and a partial group), negative min unit, 6-bit side codes.
    yield segment(3, 2, 3, 10, 6, 6, 0, 0,
                  [(0x2E66, 0xA400), (0x3C00, 0x2000)],   # d 0.1, m -0.0625; d 1.0, m 0.0078
                  [5, 63, 1], [10, 0, 63], [0, 1, 2, 3, 7, 6, 5, 4, 3, 3])
    # 2. Rotated: 5-bit codes, groups of 8, super-blocks of 16, 32 values, seed 7, 4-bit side.
    yield segment(5, 3, 4, 32, 4, 4, 1, 7,
                  [(0x3000, 0xB800), (0x2C00, 0x3400)],   # d 0.125, m -0.5; d 0.0625, m 0.25
                  [15, 3, 7, 1], [1, 15, 0, 8],
                  [(i * 11) % 32 for i in range(32)])
    # 3. 8-bit codes, one group of 4 = one super-block, 2-bit side codes, min unit -0.
    yield segment(8, 2, 2, 4, 2, 2, 0, 0xFFFFFFFF, [(0x3555, 0x8000)], [3], [2], [0, 1, 128, 255])


def main():
    root = Path(__file__).resolve().parent.parent
    path = root / "tests/fixtures/quant/v4_golden.hex"
    lines = ["# TQTC v4 golden segments (scripts/quant_v4_reference.py): hex, then f32 bits"]
    for seg in cases():
        lines.append(seg.hex())
        lines.append(" ".join(f"{v:08x}" for v in decode(seg).view(np.uint32)))
    text = "\n".join(lines) + "\n"
    # The encoder fixture must decode here too (the transcription reads what Rust writes).
    enc = bytes.fromhex((root / "tests/fixtures/quant/v4_encoder.hex").read_text().strip())
    x = (np.arange(32, dtype=np.float32) - np.float32(12.5)) * np.float32(0.25)
    y = decode(enc)
    assert np.abs(y - x).max() <= 0.6, np.abs(y - x).max()
    if "--check" in sys.argv:
        sys.exit(0 if path.read_text() == text else "v4_golden.hex differs from the transcription")
    path.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
