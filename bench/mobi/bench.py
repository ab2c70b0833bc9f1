"""MOBI side by side with onnxruntime on real models (issue 22 item 7). Run by run.sh.

Per model (LeNet-5, CIFAR-shaped CNN and MLP on digits; EfficientNet-Lite0):
1. file size per weights mode (MOBI f32/fp16/int16/int8, int8+gzip) vs the ONNX file and
   vs onnxruntime's own ``quantize_dynamic`` (QInt8 weights) output;
2. load until ready to run: ``tensorvault.open_mobi_session(path)`` (the file mapped, f32
   weights used in place, others dequantized once; see ``mobi_load``) vs
   ``onnxruntime.InferenceSession``, and for reference the Python-objects path
   ``tensorvault.read_mobi(path).session()`` (every tensor to numpy and back), one
   load per fresh process, warm page cache and cold (the file evicted first with
   ``posix_fadvise(POSIX_FADV_DONTNEED)`` after fsync; ``fincore`` confirms where
   present), with the peak RSS growth while loading (VmHWM reset through
   ``/proc/self/clear_refs`` after the imports, then VmHWM - VmRSS before the load);
3. batch-1 and batch-64 latency, one thread each (onnxruntime intra/inter-op 1; MOBI's
   runtime is single-threaded): three interleaved rounds per runtime of N/3 runs each after
   2 untimed runs, the median over rounds of each round's median process CPU time (the
   work, robust on a shared machine) and wall time. With ``TV_BEFORE_EXT`` set to the
   ``_tensorvault`` extension module of another build (e.g. main's, unpacked from its
   wheel), that build runs in the same rounds: before/after columns from one run.
Prints markdown tables with MOBI / onnxruntime ratios (< 1 means MOBI is smaller/faster).

    python bench.py [--reps N] [--loads N] [--models lenet5,cifar,mlp,efficientnet_lite0] [--latency-only] [--no-latency]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests" / "mobi_models"))

import numpy as np  # noqa: E402

from mobi_common import DIGITS_MODELS, FIXTURES, cli_convert, digits_test, ort_session, work_dir  # noqa: E402

MODES = ("f32", "fp16", "int16", "int8")


# ------------------------------------------------------------------ the MOBI side


def mobi_load(path: str):
    """Load a .mobi file until it is ready to run: ``open_mobi_session`` (whole file
    mapped and validated, CRCs included, every operator checked, f32 weights used in
    place from the map, quantized ones dequantized once); returns the session."""
    import tensorvault

    return tensorvault.open_mobi_session(path)


def mobi_load_objects(path: str):
    """The Python-objects path: ``read_mobi`` (every tensor dequantized into numpy) then
    ``session()`` (the arrays copied back into a native session)."""
    import tensorvault

    return tensorvault.read_mobi(path).session()


def mobi_run(session, name: str, x: np.ndarray):
    return session.run({name: x})


def before_load(path: str):
    """With ``TV_BEFORE_EXT`` (the ``_tensorvault`` extension module of another build,
    e.g. main before a kernel change), a session of that build on the same file, so that
    one latency run measures before, after and onnxruntime side by side; else None."""
    ext = os.environ.get("TV_BEFORE_EXT")
    if not ext:
        return None
    import importlib.machinery
    import importlib.util

    # Loaded under its own top-level name, next to the installed tensorvault package.
    loader = importlib.machinery.ExtensionFileLoader("_tensorvault", ext)
    spec = importlib.util.spec_from_file_location("_tensorvault", ext, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module.MobiSession.open(path)


# ------------------------------------------------------------------ one load per process


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def evict(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def child_load(kind: str, path: str, cold: bool) -> None:
    """In a fresh process: import both runtimes, optionally evict, time one load."""
    import onnxruntime  # noqa: F401  (imports are not part of the load)
    import tensorvault  # noqa: F401

    if cold:
        evict(path)
    else:
        with open(path, "rb") as f:  # make sure it is cached
            while f.read(1 << 20):
                pass
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
    except OSError:
        pass
    rss0 = _status("VmRSS")
    t0 = time.perf_counter()
    if kind == "mobi":
        obj = mobi_load(path)
    elif kind == "mobi-objects":
        obj = mobi_load_objects(path)
    else:
        obj = ort_session(Path(path))
    dt = time.perf_counter() - t0
    peak = _status("VmHWM") - rss0
    del obj
    print(json.dumps({"seconds": dt, "peak_rss": peak}))


def load_stats(kind: str, path: Path, cold: bool, n: int) -> dict:
    times, peaks = [], []
    for _ in range(n):
        out = subprocess.run([sys.executable, __file__, "_load", kind, str(path), "cold" if cold else "warm"],
                             capture_output=True, text=True, check=True, env=_one_thread_env()).stdout
        r = json.loads(out.strip().splitlines()[-1])
        times.append(r["seconds"])
        peaks.append(r["peak_rss"])
    return {"median_ms": 1e3 * statistics.median(times), "peak_rss": statistics.median(peaks)}


def _one_thread_env() -> dict:
    env = dict(os.environ)
    env.update(RAYON_NUM_THREADS="1", TV_THREADS="1", OMP_NUM_THREADS="1")
    return env


# ------------------------------------------------------------------ latency


def latency(fn, reps: int, warm: int = 2) -> dict:
    """Median wall time and median process CPU time of ``fn`` (ms) after ``warm`` runs.
    Both runtimes compute on the calling thread here (one intra-op thread), so CPU time
    is their work; on a loaded machine wall time adds the waits for a core."""
    for _ in range(warm):
        fn()
    wall, cpu = [], []
    for _ in range(reps):
        c0, t0 = time.process_time_ns(), time.perf_counter_ns()
        fn()
        wall.append(time.perf_counter_ns() - t0)
        cpu.append(time.process_time_ns() - c0)
    return {"wall": 1e-6 * statistics.median(wall), "cpu": 1e-6 * statistics.median(cpu)}


def child_latency(onnx_path: str, mobi_path: str, input_name: str, x_path: str, reps: int) -> None:
    x = np.load(x_path)
    sess = ort_session(Path(onnx_path), threads=1)
    out = {}
    model = mobi_load(mobi_path)
    before = before_load(mobi_path)
    for batch in (1, 64):
        xb = np.ascontiguousarray(np.resize(x, (batch, *x.shape[1:])))
        r = max(3, reps if batch == 1 else reps // 4)
        # Interleaved rounds, so every runtime sees the same machine load.
        rounds = {"ort": [], "mobi": []} if before is None else {"ort": [], "mobi": [], "before": []}
        for i in range(3):
            warm = 2 if i == 0 else 0
            rounds["ort"].append(latency(lambda: sess.run(None, {input_name: xb}), max(1, r // 3), warm))
            rounds["mobi"].append(latency(lambda: mobi_run(model, input_name, xb), max(1, r // 3), warm))
            if before is not None:
                rounds["before"].append(latency(lambda: mobi_run(before, input_name, xb), max(1, r // 3), warm))
        for k, v in rounds.items():
            for m in ("wall", "cpu"):
                out[f"{k}_{batch}_{m}"] = statistics.median(x[m] for x in v)
    print(json.dumps(out))


# ------------------------------------------------------------------ models and sizes


def models(selected):
    """(name, onnx path, input name, sample inputs) of each benchmarked model."""
    d = digits_test()
    out = []
    for name, (fname, to_input, _out) in DIGITS_MODELS.items():
        if name in selected:
            out.append((name, FIXTURES / fname, "input", to_input(d["images"][:64])))
    if "efficientnet_lite0" in selected:
        import build_efficientnet

        wd = work_dir()
        if not (wd / "efficientnet_lite0.onnx").exists() or not (wd / "effnet_crops.npy").exists():
            build_efficientnet.build(wd)
        out.append(("efficientnet_lite0", wd / "efficientnet_lite0.onnx", "images", np.load(wd / "effnet_crops.npy")[:64]))
    return out


def ort_quantized(src: Path, dst: Path) -> int:
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process is not for us
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    return dst.stat().st_size


def size_and_load_rows(args, name: str, onnx_path: Path, files: dict, out_dir: Path) -> tuple:
    """The size row and the load rows of one model (``files``: every weights mode)."""
    onnx_size = onnx_path.stat().st_size
    gz = out_dir / f"{name}.int8.gz.mobi"
    cli_convert(onnx_path, gz, "int8", gzip=True)
    ortq = ort_quantized(onnx_path, out_dir / f"{name}.ort-int8.onnx")
    sizes = {m: p.stat().st_size for m, p in files.items()}
    sizes["int8+gzip"] = gz.stat().st_size
    cells = " | ".join(f"{sizes[k]:,} ({sizes[k] / onnx_size:.1%})" for k in (*MODES, "int8+gzip"))
    size_row = f"| {name} | {onnx_size:,} | {cells} | {ortq:,} ({ortq / onnx_size:.1%}) | {sizes['int8'] / ortq:.2f}x |"
    load_rows = []
    for mode, onnx_file, mobi_file in (("f32", onnx_path, files["f32"]), ("fp16", onnx_path, files["fp16"]),
                                       ("int8", out_dir / f"{name}.ort-int8.onnx", files["int8"])):
        for cold in (False, True):
            m = load_stats("mobi", mobi_file, cold, args.loads)
            p = load_stats("mobi-objects", mobi_file, cold, args.loads)
            o = load_stats("ort", onnx_file, cold, args.loads)
            load_rows.append(
                f"| {name} | {mode} | {'cold' if cold else 'warm'} | {m['median_ms']:.2f} | {o['median_ms']:.2f} | "
                f"{m['median_ms'] / o['median_ms']:.2f}x | {m['peak_rss'] / 2**20:.1f} | {o['peak_rss'] / 2**20:.1f} | "
                f"{p['median_ms']:.2f} | {p['peak_rss'] / 2**20:.1f} | {floor(mobi_file)} |")
    return size_row, load_rows


def floor(path: Path) -> str:
    """The least a load can hold, MiB: the packed weights, the values kept unpacked
    (converted: biases, depthwise weights) and the whole file mapped (every page touched
    once while loading)."""
    import tensorvault

    mem = tensorvault.open_mobi_session(str(path)).constant_memory
    total = mem.get("packed", 0) + mem["converted"] + path.stat().st_size
    return f"{total / 2**20:.1f}"


def latency_row(args, name: str, onnx_path: Path, mobi_file: Path, mode: str, input_name: str, x_path: Path) -> str:
    out = subprocess.run([sys.executable, __file__, "_latency", str(onnx_path), str(mobi_file), input_name,
                          str(x_path), str(args.reps)], capture_output=True, text=True, check=True,
                         env=_one_thread_env()).stdout
    r = json.loads(out.strip().splitlines()[-1])
    if "before_1_cpu" in r:
        return (f"| {name} | {mode} | {r['before_1_cpu']:.3f} | {r['mobi_1_cpu']:.3f} | {r['ort_1_cpu']:.3f} | "
                f"{r['before_1_cpu'] / r['ort_1_cpu']:.2f}x | **{r['mobi_1_cpu'] / r['ort_1_cpu']:.2f}x** | "
                f"{r['before_64_cpu']:.2f} | {r['mobi_64_cpu']:.2f} | {r['ort_64_cpu']:.2f} | "
                f"{r['before_64_cpu'] / r['ort_64_cpu']:.2f}x | **{r['mobi_64_cpu'] / r['ort_64_cpu']:.2f}x** | "
                f"{r['mobi_1_wall'] / r['ort_1_wall']:.2f}x | {r['mobi_64_wall'] / r['ort_64_wall']:.2f}x |")
    return (f"| {name} | {mode} | {r['mobi_1_cpu']:.3f} | {r['ort_1_cpu']:.3f} | {r['mobi_1_cpu'] / r['ort_1_cpu']:.2f}x | "
            f"{r['mobi_64_cpu']:.2f} | {r['ort_64_cpu']:.2f} | {r['mobi_64_cpu'] / r['ort_64_cpu']:.2f}x | "
            f"{r['mobi_1_wall'] / r['ort_1_wall']:.2f}x | {r['mobi_64_wall'] / r['ort_64_wall']:.2f}x |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--loads", type=int, default=7)
    ap.add_argument("--models", default="lenet5,cifar,mlp,efficientnet_lite0")
    ap.add_argument("--latency-only", action="store_true", help="only the latency table (f32 and int8 files)")
    ap.add_argument("--no-latency", action="store_true", help="sizes and loads only")
    args = ap.parse_args()
    out_dir = work_dir() / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows_size, rows_load, rows_lat = [], [], []
    for name, onnx_path, input_name, x in models(args.models.split(",")):
        files = {}
        for mode in MODES:
            files[mode] = out_dir / f"{name}.{mode}.mobi"
            if not args.latency_only or mode in ("f32", "int8"):
                cli_convert(onnx_path, files[mode], mode)
        if not args.latency_only:
            size_row, load_rows = size_and_load_rows(args, name, onnx_path, files, out_dir)
            rows_size.append(size_row)
            rows_load.extend(load_rows)
        x_path = out_dir / f"{name}.x.npy"
        np.save(x_path, x)
        for mode in () if args.no_latency else ("f32", "int8"):
            rows_lat.append(latency_row(args, name, onnx_path, files[mode], mode, input_name, x_path))
        print(f"bench: {name} done", file=sys.stderr, flush=True)

    if not args.latency_only:
        print("\nFile sizes, bytes (% of the ONNX file); ORT int8 = onnxruntime quantize_dynamic (QInt8)\n")
        print("| model | ONNX | MOBI f32 | MOBI fp16 | MOBI int16 | MOBI int8 | MOBI int8+gzip | ORT int8 | MOBI int8 / ORT int8 |")
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows_size))
        print(f"\nLoad until ready to run, one load per fresh process, median of {args.loads} (ms); peak RSS growth while loading (MiB)."
              "\nint8 rows: MOBI int8 file vs onnxruntime on its quantize_dynamic model; fp16 rows: vs onnxruntime on the f32 model.\n")
        print("MOBI = open_mobi_session(path); read_mobi = read_mobi(path).session() (the Python-objects path).\n")
        print("floor MiB = packed weights + converted values kept + the file (mapped).\n")
        print("| model | weights | cache | MOBI ms | ORT ms | MOBI / ORT | MOBI peak MiB | ORT peak MiB | read_mobi ms | read_mobi peak MiB | floor MiB |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows_load))
    print("\nLatency, one thread: median process CPU time (ms) over interleaved rounds, and the wall-time"
          "\nratios; int8 rows: MOBI int8 file vs onnxruntime on the f32 ONNX model\n")
    if os.environ.get("TV_BEFORE_EXT"):
        print("before = the TV_BEFORE_EXT build, after = the installed wheel; ratios against onnxruntime\n")
        print("| model | MOBI weights | before b1 | after b1 | ORT b1 | before ratio | after ratio | "
              "before b64 | after b64 | ORT b64 | before ratio | after ratio | wall ratio b1 | wall ratio b64 |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    else:
        print("| model | MOBI weights | MOBI b1 | ORT b1 | ratio | MOBI b64 | ORT b64 | ratio | wall ratio b1 | wall ratio b64 |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows_lat))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_load":
        child_load(sys.argv[2], sys.argv[3], sys.argv[4] == "cold")
    elif len(sys.argv) > 1 and sys.argv[1] == "_latency":
        child_latency(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))
    else:
        main()
