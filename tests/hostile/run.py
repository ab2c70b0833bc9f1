#!/usr/bin/env python3
"""Hostile-input sweep over the CLI (issue 16): damaged and crafted files of every
format, each run through the commands that read it, under an address-space limit and a
time limit.

Every case must end in one of three ways: success (exit 0), a reported problem (exit 1,
verify commands), or a typed error (exit 2 with exactly one line on stderr that starts with
``error:``). A panic (exit 101), an abort or any other signal, a timeout, or a failed
command that leaves its output file behind is a failure of the sweep.

Usage: run.py TENSORVAULT_BINARY FIXTURES_DIR [--seed N] [--flips N]
Prints one line per failure and a summary; exits 1 if any case failed.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

VMEM_KIB = 3 << 20  # 3 GiB of address space per command
TIMEOUT_S = 30


def run(tv: str, args: list[str]) -> subprocess.CompletedProcess:
    script = f'ulimit -v {VMEM_KIB}; exec "$0" -q "$@"'
    return subprocess.run(
        ["sh", "-c", script, tv, *args],
        capture_output=True,
        timeout=TIMEOUT_S,
    )


def mutations(data: bytes, rng: random.Random, flips: int):
    """(name, bytes) variants of `data`: truncations, bit flips, lying u32/u64 fields,
    appended garbage."""
    n = len(data)
    for cut in sorted({0, 1, 5, 8, 12, 16, 64, n // 3, n // 2, n - 1}):
        if 0 <= cut < n:
            yield f"truncate@{cut}", data[:cut]
    for _ in range(flips):
        if n == 0:
            break
        # Half the flips in the first 512 bytes, where headers live.
        pos = rng.randrange(min(n, 512)) if rng.random() < 0.5 else rng.randrange(n)
        b = bytearray(data)
        b[pos] ^= 1 << rng.randrange(8)
        yield f"flip@{pos}", bytes(b)
    fixed = [0, 4, 6, 8, 12, 16, 24, 32]
    for k in range(len(fixed) + max(4, flips // 4)):
        if n < 8:
            break
        pos = fixed[k] if k < len(fixed) else rng.randrange(min(n - 8, 256))
        for val, fmt in ((0xFFFFFFFF, "<I"), (0x7FFFFFFF, "<I"), (0xFFFFFFFFFFFFFFF0, "<Q"), (0, "<I")):
            b = bytearray(data)
            size = struct.calcsize(fmt)
            if pos + size <= n:
                b[pos:pos + size] = struct.pack(fmt, val)
                yield f"field@{pos}={val:#x}", bytes(b)
    yield "garbage-tail", data + bytes(rng.randrange(256) for _ in range(300))


class Sweep:
    def __init__(self, tv: str, work: str):
        self.tv, self.work = tv, work
        self.cases = 0
        self.failures: list[str] = []

    def check(self, label: str, args: list[str], outputs: list[str] = ()) -> None:
        self.cases += 1
        for o in outputs:
            if os.path.isdir(o):
                shutil.rmtree(o)
            elif os.path.exists(o):
                os.remove(o)
        try:
            p = run(self.tv, args)
        except subprocess.TimeoutExpired:
            self.failures.append(f"{label}: timeout after {TIMEOUT_S} s: {args}")
            return
        err = p.stderr.decode(errors="replace")
        rc = p.returncode
        if rc not in (0, 1, 2):
            self.failures.append(f"{label}: exit {rc} (panic/abort/signal): {args}\n{err[-400:]}")
            return
        if rc == 2:
            lines = err.rstrip("\n").split("\n")
            if len(lines) != 1 or not lines[0].startswith("error: "):
                self.failures.append(f"{label}: exit 2 without one 'error:' line: {err[-400:]!r}")
        if rc != 0:
            left = [o for o in outputs if os.path.exists(o)]
            if left:
                self.failures.append(f"{label}: exit {rc} left {left}")
        leftovers = [f for f in os.listdir(self.work) if f.endswith(".tmp")]
        if leftovers:
            self.failures.append(f"{label}: temp files left: {leftovers}")
            for f in leftovers:
                os.remove(os.path.join(self.work, f))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tv")
    ap.add_argument("fixtures")
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--flips", type=int, default=12)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="tv-hostile-")
    sw = Sweep(os.path.abspath(a.tv), work)
    f = lambda *p: os.path.join(a.fixtures, *p)  # noqa: E731
    w = lambda name: os.path.join(work, name)  # noqa: E731
    try:
        # CVC: v1.0 fp16 / int8 / sections, legacy v0.
        for name in ["c_tiny_fp16.cvc", "d_mixed_fp16_int8.cvc", "i_sections_int8.cvc",
                     "e_legacy_v010_int8_cs4.cvc", "j_mmap_optimized_fp16.cvc"]:
            data = open(f("cvc", name), "rb").read()
            for mname, bad in mutations(data, rng, a.flips):
                path = w("in.cvc")
                open(path, "wb").write(bad)
                label = f"cvc {name} {mname}"
                sw.check(label + " inspect", ["cvc", "inspect", path])
                sw.check(label + " verify", ["cvc", "verify", path])
                sw.check(label + " load", ["cvc", "load", path, w("out.npy")], [w("out.npy")])
        # npy input to every command that reads one.
        data = open(f("cvc", "c_tiny_10x3_f32.npy"), "rb").read()
        for mname, bad in mutations(data, rng, a.flips):
            path = w("in.npy")
            open(path, "wb").write(bad)
            label = f"npy {mname}"
            sw.check(label + " cvc pack", ["cvc", "pack", path, w("o.cvc")], [w("o.cvc")])
            sw.check(label + " cgeb pack", ["cgeb", "pack", path, w("o")], [w("o.cgeb"), w("o.cgei")])
            sw.check(label + " store put", ["store", "put", w("st"), "t", "c", "x", path, "--tier", "2"])
            sw.check(label + " quant eval", ["quant", "eval", path, "--bits", "3,8"])
        # MOBI: the LeNet-5 example.
        mobi = w("lenet.mobi")
        subprocess.run([sw.tv, "-q", "mobi", "example", "lenet5", mobi], check=True)
        data = open(mobi, "rb").read()
        for mname, bad in mutations(data, rng, a.flips):
            path = w("in.mobi")
            open(path, "wb").write(bad)
            label = f"mobi {mname}"
            for cmd in (["inspect"], ["validate"], ["graph"], ["graph", "--dot"]):
                sw.check(f"{label} {' '.join(cmd)}", ["mobi", cmd[0], path, *cmd[1:]])
            sw.check(label + " quantize", ["mobi", "quantize", path, w("q.mobi"), "--to", "int8"], [w("q.mobi")])
        # ONNX: the tiny CNN fixture through `mobi convert` (no partial output on error).
        data = open(f("onnx", "tiny_cnn_opset13.onnx"), "rb").read()
        for mname, bad in mutations(data, rng, a.flips):
            path = w("in.onnx")
            open(path, "wb").write(bad)
            sw.check(f"onnx {mname} mobi convert", ["mobi", "convert", path, w("c.mobi"), "--weights", "int8"],
                     [w("c.mobi")])
        # CGEB: a packed batch; damage the data file and the index in turn.
        subprocess.run([sw.tv, "-q", "cgeb", "pack", f("cvc", "c_tiny_10x3_f32.npy"), w("b"),
                        "--alignment", "64"], check=True)
        for part in ("cgeb", "cgei"):
            pristine = {p: open(w(f"b.{p}"), "rb").read() for p in ("cgeb", "cgei")}
            for mname, bad in mutations(pristine[part], rng, a.flips):
                open(w(f"b.{part}"), "wb").write(bad)
                label = f"cgeb .{part} {mname}"
                sw.check(label + " inspect", ["cgeb", "inspect", w("b")])
                sw.check(label + " verify", ["cgeb", "verify", w("b")])
                sw.check(label + " get", ["cgeb", "get", w("b"), "--index", "3"])
            open(w(f"b.{part}"), "wb").write(pristine[part])
        # Store: damage each file of a small collection.
        st = w("store")
        subprocess.run([sw.tv, "-q", "store", "put", st, "t", "c", "x", f("cvc", "vectors_1000x768_f32.npy"),
                        "--tier", "1"], check=True)
        coll = os.path.join(st, "t", "c")
        for fname in ("meta.log", "names.log", "tier1.dat"):
            pristine = open(os.path.join(coll, fname), "rb").read()
            for mname, bad in mutations(pristine, rng, a.flips // 2):
                open(os.path.join(coll, fname), "wb").write(bad)
                label = f"store {fname} {mname}"
                sw.check(label + " ls", ["store", "ls", st])
                sw.check(label + " verify", ["store", "verify", st])
                sw.check(label + " get", ["store", "get", st, "t", "c", "x", w("x.npy")], [w("x.npy")])
            open(os.path.join(coll, fname), "wb").write(pristine)
        # Non-regular files (issue 25 class 1): a FIFO as every input and as each store
        # file. Opening a FIFO used to block forever (a timeout here).
        if hasattr(os, "mkfifo"):
            fifo = w("fifo")
            os.mkfifo(fifo)
            for args, outs in (
                (["cvc", "inspect", fifo], []), (["cvc", "verify", fifo], []),
                (["cvc", "load", fifo, w("o.npy")], [w("o.npy")]),
                (["cvc", "pack", fifo, w("o.cvc")], [w("o.cvc")]),
                (["cgeb", "inspect", fifo], []), (["cgeb", "pack", fifo, w("o")], [w("o.cgeb")]),
                (["mobi", "inspect", fifo], []), (["mobi", "validate", fifo], []),
                (["quant", "eval", fifo, "--bits", "8"], []),
                (["registry", "save", w("reg"), "--from", fifo], []),
                (["registry", "inspect", fifo], []),
                (["store", "put", w("st2"), "t", "c", "x", fifo], []),
            ):
                sw.check("fifo " + " ".join(args[:2]), args, outs)
            for fname in ("meta.log", "names.log", "tier1.dat"):
                path = os.path.join(coll, fname)
                pristine = open(path, "rb").read()
                os.remove(path)
                os.mkfifo(path)
                label = f"store {fname} fifo"
                sw.check(label + " ls", ["store", "ls", st])
                sw.check(label + " ls coll", ["store", "ls", st, "t", "c"])
                sw.check(label + " verify", ["store", "verify", st])
                sw.check(label + " get", ["store", "get", st, "t", "c", "x", w("x.npy")], [w("x.npy")])
                os.remove(path)
                open(path, "wb").write(pristine)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for line in sw.failures:
        print("FAIL", line)
    print(f"{sw.cases} hostile cases, {len(sw.failures)} failed")
    return 1 if sw.failures else 0


if __name__ == "__main__":
    sys.exit(main())
