#!/usr/bin/env python3
"""Independent transcription of docs/formats/quant.md section 12 (TQTC version 5, the
entropy-coded envelope): builds the envelope of a version 2 segment and decodes it back,
using only the spec. Prints the envelope as hex; `segment_v5_tests.rs`
(`golden_envelope_bytes`) asserts the Rust encoder writes the same bytes, and
`golden_wide_envelope_bytes` the same for 16 and 64 lanes (LANES_LOG2 4 and 6, session 15)
over the 4096-value segment that test builds.

Usage: python3 scripts/rans_v5_golden.py [INNER_HEX [LANES_LOG2]]
"""
import math
import struct
import sys

MAGIC = bytes([0x54, 0x51, 0x54, 0x43, 0x0D, 0x0A, 0x1A, 0x0A])
RANS_L = 1 << 16

# The golden inner segment: 512 values at 2 bits, one flat group of 512 (see the test).
GOLDEN_INNER = (
    "545154430d0a1a0a02020009000200000100000001562b3b000080bf00000000ff00"
    + "aba8abaa" * 32
)


def v2_code_region(inner):
    """Offset of the packed codes of a v2 segment and the number of codes (spec §9)."""
    assert inner[:8] == MAGIC and inner[8] == 2
    bits, axis, glog = inner[9], inner[10], inner[11]
    n, width, raw_rows = struct.unpack_from("<IHH", inner, 12)
    m = n - raw_rows * width
    g = 1 << glog
    groups = -(-m // g) if axis == 0 else -(-(m // width) // g) * width
    return 32 + 2 * raw_rows * width + 2 * groups, m, bits


def unpack(b, bits, m):
    v = int.from_bytes(b, "little")
    return [(v >> (i * bits)) & ((1 << bits) - 1) for i in range(m)]


def pack(codes, bits):
    v = 0
    for i, c in enumerate(codes):
        v |= c << (i * bits)
    return v.to_bytes(-(-len(codes) * bits // 8), "little")


def quantize(counts, pb):
    """§12.4 step 2: nearest share (at least 1), then unit moves by count per unit."""
    total, target = sum(counts), 1 << pb
    present = sum(1 for c in counts if c)
    if total == 0 or present > target:
        return None
    f = [0 if c == 0 else max(1, (c * target * 2 + total) // (2 * total)) for c in counts]
    diff = target - sum(f)
    while diff != 0:
        if diff > 0:
            cands = [s for s in range(len(f)) if counts[s] > 0]
            s = max(cands, key=lambda s: (counts[s] / f[s], -s))  # first of the largest
        else:
            cands = [s for s in range(len(f)) if f[s] > 1]
            s = min(cands, key=lambda s: (counts[s] / f[s], s))  # first of the smallest
        step = 1 if diff > 0 else -1
        f[s] += step
        diff -= step
    return f


def varint_len(f):
    return 1 if f < 0x80 else 2


def estimated(counts, f, pb):
    bits = sum(c * (pb - math.log2(fs)) for c, fs in zip(counts, f) if c)
    return sum(varint_len(x) for x in f) + bits / 8


def best_table(counts):
    best = None
    for pb in range(1, 13):
        f = quantize(counts, pb)
        if f is None:
            continue
        e = estimated(counts, f, pb)
        if best is None or e < best[0]:
            best = (e, pb, f)
    return best[1], best[2]


def rans_encode(codes, f, pb, lanes):
    cum = [sum(f[:s]) for s in range(len(f))]
    x = [RANS_L] * lanes
    words = []
    for i in reversed(range(len(codes))):
        j, s = i % lanes, codes[i]
        x_max = ((RANS_L >> pb) << 16) * f[s]
        if x[j] >= x_max:
            words.append(x[j] & 0xFFFF)
            x[j] >>= 16
        x[j] = (x[j] // f[s] << pb) + x[j] % f[s] + cum[s]
    out = b"".join(struct.pack("<I", s) for s in x)
    return out + b"".join(struct.pack("<H", w) for w in reversed(words))


def rans_decode(stream, f, pb, lanes, m):
    cum = [sum(f[:s]) for s in range(len(f))]
    x = list(struct.unpack_from("<%dI" % lanes, stream, 0))
    assert all(s >= RANS_L for s in x)
    pos, out = 4 * lanes, []
    for i in range(m):
        j = i % lanes
        slot = x[j] & ((1 << pb) - 1)
        s = max(k for k in range(len(f)) if f[k] and cum[k] <= slot)
        out.append(s)
        x[j] = f[s] * (x[j] >> pb) + slot - cum[s]
        if x[j] < RANS_L:
            (w,) = struct.unpack_from("<H", stream, pos)
            x[j] = (x[j] << 16) | w
            pos += 2
    assert pos == len(stream) and all(s == RANS_L for s in x)
    return out


def table_bytes(f):
    b = bytearray()
    for v in f:
        b += bytes([v]) if v < 0x80 else bytes([0x80 | (v & 0x7F), v >> 7])
    return bytes(b)


def envelope(inner, lanes_log2):
    at, m, bits = v2_code_region(inner)
    codes = unpack(inner[at:], bits, m)
    counts = [codes.count(s) for s in range(1 << bits)]
    pb, f = best_table(counts)
    stream = rans_encode(codes, f, pb, 1 << lanes_log2)
    side = inner[10:at]
    head = MAGIC + bytes([5, bits, inner[8], lanes_log2, pb]) + struct.pack("<II", m, len(side))
    return head + side + table_bytes(f) + stream


def rebuild(env):
    assert env[:8] == MAGIC and env[8] == 5
    bits, inner_version, lanes_log2, pb = env[9], env[10], env[11], env[12]
    m, side_len = struct.unpack_from("<II", env, 13)
    side = env[21 : 21 + side_len]
    pos, f = 21 + side_len, []
    for _ in range(1 << bits):
        b0 = env[pos]
        if b0 < 0x80:
            f.append(b0)
            pos += 1
        else:
            f.append((b0 & 0x7F) | env[pos + 1] << 7)
            pos += 2
    assert sum(f) == 1 << pb
    codes = rans_decode(env[pos:], f, pb, 1 << lanes_log2, m)
    return MAGIC + bytes([inner_version, bits]) + side + pack(codes, bits)


def main():
    inner = bytes.fromhex(sys.argv[1] if len(sys.argv) > 1 else GOLDEN_INNER)
    lanes_log2 = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    env = envelope(inner, lanes_log2)
    assert rebuild(env) == inner
    print(env.hex())


if __name__ == "__main__":
    main()
