"""Shared helpers of the MOBI real-model tests: paths, ONNX graph building, model inputs,
the `tensorvault` CLI calls (convert, run) and the comparisons against onnxruntime."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = HERE / "fixtures"
WEIGHTS_MODES = ("f32", "fp16", "int16", "int8")


def target_dir() -> Path:
    """The cargo target directory (CARGO_TARGET_DIR or ROOT/target)."""
    return Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")).resolve()


def work_dir() -> Path:
    """Where rebuilt models and generated cases live (not committed)."""
    d = Path(os.environ.get("TV_MOBI_WORK", target_dir() / "mobi-models"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def tensorvault_bin() -> Path:
    """The CLI under test: TV_BIN, else target/release/tensorvault, else target/debug."""
    if "TV_BIN" in os.environ:
        return Path(os.environ["TV_BIN"])
    for profile in ("release", "debug"):
        p = target_dir() / profile / "tensorvault"
        if p.exists():
            return p
    raise FileNotFoundError("no tensorvault binary: build it (cargo build --release -p tensorvault-cli) or set TV_BIN")


# ---------------------------------------------------------------- ONNX building


class GraphBuilder:
    """A small helper over onnx.helper: initializers and nodes with generated names."""

    def __init__(self, name: str):
        self.name = name
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []
        self._n = 0

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: Sequence[str], out: Optional[str] = None, **attrs) -> str:
        self._n += 1
        out = out or f"{op.lower()}_{self._n}"
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=f"{op}_{self._n}", **attrs))
        return out

    def model(
        self,
        inputs: Sequence[onnx.ValueInfoProto],
        outputs: Sequence[onnx.ValueInfoProto],
        opset: int = 13,
        doc: str = "",
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, list(inputs), list(outputs), self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="tensorvault-tests")
        m.ir_version = 8
        m.doc_string = doc
        onnx.checker.check_model(m, full_check=True)
        return m


def f32_input(name: str, shape: Sequence) -> onnx.ValueInfoProto:
    """A float tensor value info; strings in ``shape`` are symbolic dimensions."""
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


# ---------------------------------------------------------------- digits inputs


def digits_test() -> Dict[str, np.ndarray]:
    """The committed held-out digits: ``images`` uint8 (N, 8, 8) in 0..16, ``labels``."""
    with np.load(FIXTURES / "digits_test.npz") as z:
        return {"images": z["images"], "labels": z["labels"]}


def lenet_input(images: np.ndarray) -> np.ndarray:
    """(N, 1, 32, 32) float32: each 8x8 digit upsampled 4x (nearest), scaled to 0..1."""
    x = images.astype(np.float32) / 16.0
    return np.ascontiguousarray(np.kron(x, np.ones((4, 4), np.float32))[:, None])


CIFAR_TINT = np.array([1.0, 0.75, 0.5], np.float32)


def cifar_input(images: np.ndarray) -> np.ndarray:
    """(N, 3, 32, 32) float32: the LeNet input tinted into three channels, centred."""
    x = lenet_input(images)[:, 0]
    return np.ascontiguousarray(x[:, None] * CIFAR_TINT[None, :, None, None] - 0.25)


def mlp_input(images: np.ndarray) -> np.ndarray:
    """(N, 64) float32 in 0..1, as the scikit-learn MLP was trained."""
    return np.ascontiguousarray(images.reshape(len(images), 64).astype(np.float32) / 16.0)


def seq1d_input(images: np.ndarray) -> np.ndarray:
    """(N, 8, 8) float32 in 0..1: a sequence of 8 columns with 8 channels (the rows)."""
    return np.ascontiguousarray(images.astype(np.float32) / 16.0)


DIGITS_MODELS = {
    # name: (onnx file, input builder, output name)
    "lenet5": ("lenet5_digits.onnx", lenet_input, "probabilities"),
    "cifar": ("cifar_digits.onnx", cifar_input, "logits"),
    "mlp": ("mlp_digits.onnx", mlp_input, "probabilities"),
    "seq1d": ("seq1d_digits.onnx", seq1d_input, "logits"),
}


# ---------------------------------------------------------------- onnxruntime


def ort_session(path: Path, threads: int = 1):
    """An onnxruntime CPU session with ``threads`` intra-op threads, no graph rewrites
    beyond the basic ones (the reference computes what the graph says)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def ort_run(path: Path, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """All outputs of ``path`` for ``feeds``, by output name."""
    s = ort_session(path)
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, feeds)))


# ---------------------------------------------------------------- the CLI


class CliError(RuntimeError):
    """A tensorvault command exited non-zero; ``stderr`` holds its one-line error."""

    def __init__(self, argv: Sequence[str], code: int, stderr: str):
        super().__init__(f"{' '.join(map(str, argv))}: exit {code}: {stderr.strip()}")
        self.code, self.stderr = code, stderr


def cli(*args, timeout: float = 600) -> str:
    """Run ``tensorvault -q ARGS``; stdout on success, CliError otherwise."""
    argv = [str(tensorvault_bin()), "-q", *map(str, args)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise CliError(argv, p.returncode, p.stderr)
    return p.stdout


def cli_has(*verb: str) -> bool:
    """Whether ``tensorvault VERB --help`` exists (a verb not yet on main is skipped)."""
    try:
        argv = [str(tensorvault_bin()), *verb, "--help"]
    except FileNotFoundError:
        return False
    return subprocess.run(argv, capture_output=True).returncode == 0


def cli_convert(src: Path, dst: Path, weights: str = "f32", gzip: bool = False) -> dict:
    """``tensorvault mobi convert SRC DST --weights W [--gzip] --json``; its JSON report."""
    args = ["mobi", "convert", src, dst, "--weights", weights, "--json"]
    if gzip:
        args.append("--gzip")
    out = cli(*args)
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        return {}


def cli_run(model: Path, inputs: Dict[str, np.ndarray], outdir: Optional[Path] = None) -> Dict[str, np.ndarray]:
    """``tensorvault mobi run MODEL --input NAME=X.npy ... --output-dir DIR``; every
    ``DIR/<output>.npy`` it wrote, by output name."""
    with tempfile.TemporaryDirectory(prefix="mobi-run-") as tmp:
        tmp = Path(tmp)
        out = outdir or tmp / "out"
        args: List = ["mobi", "run", model]
        for i, (name, arr) in enumerate(inputs.items()):
            p = tmp / f"in{i}.npy"
            np.save(p, arr)
            args += ["--input", f"{name}={p}"]
        args += ["--output-dir", out]
        cli(*args)
        return {p.stem: np.load(p) for p in sorted(Path(out).glob("*.npy"))}


# ---------------------------------------------------------------- comparisons


def scaled_max_abs_diff(ours: np.ndarray, ref: np.ndarray) -> float:
    """max |ours - ref| divided by max(1, max |ref|): the f32 check's measure."""
    ours = np.asarray(ours, np.float64)
    ref = np.asarray(ref, np.float64)
    if ours.shape != ref.shape:
        return float("inf")
    return float(np.max(np.abs(ours - ref), initial=0.0) / max(1.0, float(np.max(np.abs(ref), initial=0.0))))


def top1_agreement(ours: np.ndarray, ref: np.ndarray) -> float:
    """Fraction of rows whose argmax matches."""
    return float(np.mean(np.argmax(ours, axis=-1) == np.argmax(ref, axis=-1)))


def accuracy(scores: np.ndarray, labels: np.ndarray) -> float:
    """Top-1 accuracy in percent."""
    return float(100.0 * np.mean(np.argmax(scores, axis=-1) == labels))
