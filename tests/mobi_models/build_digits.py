"""Train the digits models and write the committed fixtures (deterministic seeds).

Real data: scikit-learn's ``load_digits`` (1,797 handwritten 8x8 digits), split 80/20
with ``train_test_split(random_state=0, stratify=labels)``.

- ``lenet5_digits.onnx``: LeNet-5 shape on the 4x-upsampled digits (1x32x32):
  Conv5x5(6)-BN-Relu-MaxPool, Conv5x5(16)-BN-Relu-MaxPool, Flatten, Gemm(120)-Relu,
  Gemm(84)-Relu, Gemm(10), Softmax. 61,706 weights + BN. Output ``probabilities``.
- ``cifar_digits.onnx``: a CIFAR-10-shaped CNN on the digits tinted into 3x32x32:
  3x [Conv3x3 pad 1 - BN - Relu - MaxPool] (16, 32, 64 channels), Reshape [0, -1],
  Gemm(64, weights as [in, out], transB=0)-Relu, Gemm(10). Output ``logits``.
- ``mlp_digits.onnx``: scikit-learn ``MLPClassifier((64,))`` on the 64 pixels, exported
  with skl2onnx (zipmap off), the label branch pruned: output ``probabilities``.
- ``seq1d_digits.onnx``: a 1-D CNN reading each digit as a sequence of 8 columns with 8
  channels (its rows): Conv1d k3 pad 1 (32) - BN - Relu - MaxPool1d 2, Conv1d k3 pad 1 (64)
  - BN - Relu - MaxPool1d 2, Flatten, Gemm(10). Output ``logits``.

Both CNNs are trained here in numpy (im2col convolutions, batch statistics in BatchNorm,
Adam), so the BatchNorm nodes carry real running statistics and the importer's
BatchNorm and Gemm folds run on real values. Every model has a symbolic batch dim.

Also writes ``digits_test.npz`` (held-out images uint8 + labels) and
``<model>_reference.npy``: onnxruntime's outputs on the held-out inputs.
Usage: python build_digits.py [--only seq1d]  (about a minute; rewrites
tests/mobi_models/fixtures/, or only the named model's files and leaves the others as
committed)
"""

from __future__ import annotations

import numpy as np
import onnx
from numpy.lib.stride_tricks import sliding_window_view

from mobi_common import DIGITS_MODELS, FIXTURES, GraphBuilder, accuracy, f32_input, ort_run

SEED = 0
BN_EPS = 1e-5
BN_MOMENTUM = 0.9


def load_split():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    images = d.images.astype(np.uint8)
    return train_test_split(images, d.target, test_size=0.2, random_state=SEED, stratify=d.target)


# ------------------------------------------------------------ numpy layers (train mode)


class Conv:
    """2-D convolution, im2col; ``k`` and ``pad`` are an int (square) or ``(h, w)``."""

    def __init__(self, rng, cin, cout, k, pad):
        self.kh, self.kw = (k, k) if isinstance(k, int) else k
        self.ph, self.pw = (pad, pad) if isinstance(pad, int) else pad
        self.k, self.pad = k, pad
        self.w = (rng.standard_normal((cout, cin, self.kh, self.kw)) * np.sqrt(2.0 / (cin * self.kh * self.kw))).astype(np.float32)
        self.b = np.zeros(cout, np.float32)

    def params(self):
        return [self.w, self.b]

    def forward(self, x):
        ph, pw = self.ph, self.pw
        if ph or pw:
            x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        self.xshape = x.shape
        cols = sliding_window_view(x, (self.kh, self.kw), axis=(2, 3))  # N,C,OH,OW,kh,kw
        n, c, oh, ow = cols.shape[:4]
        self.cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, -1)
        y = self.cols @ self.w.reshape(len(self.w), -1).T + self.b
        self.oshape = (n, oh, ow)
        return y.reshape(n, oh, ow, -1).transpose(0, 3, 1, 2)

    def backward(self, dy):
        n, oh, ow = self.oshape
        dy2 = dy.transpose(0, 2, 3, 1).reshape(n * oh * ow, -1)
        self.grads = [(dy2.T @ self.cols).reshape(self.w.shape), dy2.sum(0)]
        dcols = (dy2 @ self.w.reshape(len(self.w), -1)).reshape(n, oh, ow, self.xshape[1], self.kh, self.kw)
        dx = np.zeros(self.xshape, np.float32)
        for i in range(self.kh):
            for j in range(self.kw):
                dx[:, :, i : i + oh, j : j + ow] += dcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
        ph, pw = self.ph, self.pw
        return dx[:, :, ph : dx.shape[2] - ph, pw : dx.shape[3] - pw]


class BatchNorm:
    def __init__(self, c):
        self.g, self.b = np.ones(c, np.float32), np.zeros(c, np.float32)
        self.mean, self.var = np.zeros(c, np.float32), np.ones(c, np.float32)

    def params(self):
        return [self.g, self.b]

    def forward(self, x):
        mu = x.mean((0, 2, 3))
        var = x.var((0, 2, 3))
        self.mean = BN_MOMENTUM * self.mean + (1 - BN_MOMENTUM) * mu
        n = x.size / x.shape[1]
        self.var = BN_MOMENTUM * self.var + (1 - BN_MOMENTUM) * var * n / (n - 1)
        self.inv = 1.0 / np.sqrt(var + BN_EPS)
        self.xhat = (x - mu[None, :, None, None]) * self.inv[None, :, None, None]
        return self.g[None, :, None, None] * self.xhat + self.b[None, :, None, None]

    def backward(self, dy):
        self.grads = [(dy * self.xhat).sum((0, 2, 3)), dy.sum((0, 2, 3))]
        n = dy.size / dy.shape[1]
        dxhat = dy * self.g[None, :, None, None]
        return (
            self.inv[None, :, None, None]
            / n
            * (n * dxhat - dxhat.sum((0, 2, 3))[None, :, None, None] - self.xhat * (dxhat * self.xhat).sum((0, 2, 3))[None, :, None, None])
        )


class Relu:
    def params(self):
        return []

    def forward(self, x):
        self.mask = x > 0
        return x * self.mask

    def backward(self, dy):
        self.grads = []
        return dy * self.mask


class MaxPool2:
    def params(self):
        return []

    def forward(self, x):
        n, c, h, w = x.shape
        r = x.reshape(n, c, h // 2, 2, w // 2, 2)
        y = r.max((3, 5))
        self.mask = r == y[:, :, :, None, :, None]
        return y

    def backward(self, dy):
        self.grads = []
        d = self.mask * dy[:, :, :, None, :, None]
        n, c, h2, _, w2, _ = d.shape
        return d.reshape(n, c, h2 * 2, w2 * 2)


class Conv1d(Conv):
    """1-D convolution ``[N, C, L]`` (kernel k, symmetric padding): the 2-D one with a
    ``(1, k)`` kernel on ``[N, C, 1, L]``."""

    def __init__(self, rng, cin, cout, k, pad):
        super().__init__(rng, cin, cout, (1, k), (0, pad))
        self.k, self.pad = k, pad

    def forward(self, x):
        return super().forward(x[:, :, None, :])[:, :, 0, :]

    def backward(self, dy):
        return super().backward(dy[:, :, None, :])[:, :, 0, :]


class BatchNorm1d(BatchNorm):
    """BatchNorm over ``[N, C, L]``: the 2-D one on ``[N, C, 1, L]``."""

    def forward(self, x):
        return super().forward(x[:, :, None, :])[:, :, 0, :]

    def backward(self, dy):
        return super().backward(dy[:, :, None, :])[:, :, 0, :]


class MaxPool1d2:
    """Max over non-overlapping pairs along L."""

    def params(self):
        return []

    def forward(self, x):
        n, c, l = x.shape
        r = x.reshape(n, c, l // 2, 2)
        y = r.max(3)
        self.mask = r == y[:, :, :, None]
        return y

    def backward(self, dy):
        self.grads = []
        d = self.mask * dy[:, :, :, None]
        return d.reshape(d.shape[0], d.shape[1], -1)


class Flatten:
    def params(self):
        return []

    def forward(self, x):
        self.shape = x.shape
        return x.reshape(len(x), -1)

    def backward(self, dy):
        self.grads = []
        return dy.reshape(self.shape)


class Linear:
    def __init__(self, rng, cin, cout):
        self.w = (rng.standard_normal((cout, cin)) * np.sqrt(2.0 / cin)).astype(np.float32)
        self.b = np.zeros(cout, np.float32)

    def params(self):
        return [self.w, self.b]

    def forward(self, x):
        self.x = x
        return x @ self.w.T + self.b

    def backward(self, dy):
        self.grads = [dy.T @ self.x, dy.sum(0)]
        return dy @ self.w


def train(layers, x, y, epochs, rng, lr=2e-3, batch=32):
    """Adam on softmax cross-entropy; returns the layers (trained in place)."""
    params = [p for l in layers for p in l.params()]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    t = 0
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        for s in range(0, len(x), batch):
            idx = order[s : s + batch]
            h = x[idx]
            for l in layers:
                h = l.forward(h)
            p = np.exp(h - h.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            d = p.copy()
            d[np.arange(len(idx)), y[idx]] -= 1
            d /= len(idx)
            for l in reversed(layers):
                d = l.backward(d)
            grads = [g for l in layers for g in l.grads]
            t += 1
            a = lr * (0.5 if epoch >= epochs - 2 else 1.0)
            for i, (p_, g) in enumerate(zip(params, grads)):
                m[i] = 0.9 * m[i] + 0.1 * g
                v[i] = 0.999 * v[i] + 0.001 * g * g
                p_ -= (a * (m[i] / (1 - 0.9**t)) / (np.sqrt(v[i] / (1 - 0.999**t)) + 1e-8)).astype(np.float32)
    return layers


# ------------------------------------------------------------ ONNX export


def export_cnn(name, layers, in_shape, out_name, softmax, gemm_transposed):
    g = GraphBuilder(name)
    x = "input"
    n_conv = n_fc = 0
    fcs = [l for l in layers if isinstance(l, Linear)]
    for l in layers:
        if isinstance(l, Conv):
            n_conv += 1
            w = g.const(f"conv{n_conv}.weight", l.w)
            b = g.const(f"conv{n_conv}.bias", l.b)
            p = l.pad
            x = g.node("Conv", [x, w, b], kernel_shape=[l.k, l.k], pads=[p, p, p, p], strides=[1, 1])
        elif isinstance(l, BatchNorm):
            args = [g.const(f"bn{n_conv}.{k}", v) for k, v in (("scale", l.g), ("bias", l.b), ("mean", l.mean), ("var", l.var))]
            x = g.node("BatchNormalization", [x, *args], epsilon=BN_EPS)
        elif isinstance(l, Relu):
            x = g.node("Relu", [x])
        elif isinstance(l, MaxPool2):
            x = g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
        elif isinstance(l, Flatten):
            if gemm_transposed:
                x = g.node("Flatten", [x], axis=1)
            else:
                x = g.node("Reshape", [x, g.const("flat_shape", np.array([0, -1], np.int64))])
        elif isinstance(l, Linear):
            n_fc += 1
            last = l is fcs[-1]
            out = out_name if last and not softmax else None
            if gemm_transposed:
                w = g.const(f"fc{n_fc}.weight", l.w)
                x = g.node("Gemm", [x, w, g.const(f"fc{n_fc}.bias", l.b)], out=out, transB=1)
            else:
                w = g.const(f"fc{n_fc}.weight", np.ascontiguousarray(l.w.T))
                x = g.node("Gemm", [x, w, g.const(f"fc{n_fc}.bias", l.b)], out=out)
    if softmax:
        g.node("Softmax", [x], out=out_name, axis=-1)
    return g.model([f32_input("input", ["batch", *in_shape])], [f32_input(out_name, ["batch", 10])],
                   doc=f"{name}: trained in numpy on scikit-learn load_digits (tests/mobi_models/build_digits.py)")


def export_seq1d(layers):
    """The 1-D CNN as ONNX: Conv (kernel_shape [k], pads [p, p]), BatchNormalization,
    Relu, MaxPool (kernel_shape [2]), Flatten, Gemm."""
    g = GraphBuilder("seq1d_digits")
    x = "input"
    n_conv = 0
    for l in layers:
        if isinstance(l, Conv1d):
            n_conv += 1
            w, b = g.const(f"conv{n_conv}.weight", l.w[:, :, 0, :]), g.const(f"conv{n_conv}.bias", l.b)
            x = g.node("Conv", [x, w, b], kernel_shape=[l.k], pads=[l.pad, l.pad], strides=[1])
        elif isinstance(l, BatchNorm1d):
            args = [g.const(f"bn{n_conv}.{k}", v) for k, v in (("scale", l.g), ("bias", l.b), ("mean", l.mean), ("var", l.var))]
            x = g.node("BatchNormalization", [x, *args], epsilon=BN_EPS)
        elif isinstance(l, Relu):
            x = g.node("Relu", [x])
        elif isinstance(l, MaxPool1d2):
            x = g.node("MaxPool", [x], kernel_shape=[2], strides=[2])
        elif isinstance(l, Flatten):
            x = g.node("Flatten", [x], axis=1)
        elif isinstance(l, Linear):
            w = g.const("fc.weight", l.w)
            x = g.node("Gemm", [x, w, g.const("fc.bias", l.b)], out="logits", transB=1)
    return g.model([f32_input("input", ["batch", 8, 8])], [f32_input("logits", ["batch", 10])],
                   doc="seq1d_digits: a 1-D CNN trained in numpy on scikit-learn load_digits (tests/mobi_models/build_digits.py)")


def eval_layers(layers, x):
    """Inference with running statistics (what the exported graph computes)."""
    h = x
    for l in layers:
        if isinstance(l, BatchNorm1d):
            h = (h - l.mean[None, :, None]) / np.sqrt(l.var[None, :, None] + BN_EPS) * l.g[None, :, None] + l.b[None, :, None]
        elif isinstance(l, BatchNorm):
            h = (h - l.mean[None, :, None, None]) / np.sqrt(l.var[None, :, None, None] + BN_EPS) * l.g[None, :, None, None] + l.b[None, :, None, None]
        else:
            h = l.forward(h)
    return h


def build_lenet(rng, xtr, ytr):
    layers = [Conv(rng, 1, 6, 5, 0), BatchNorm(6), Relu(), MaxPool2(),
              Conv(rng, 6, 16, 5, 0), BatchNorm(16), Relu(), MaxPool2(), Flatten(),
              Linear(rng, 400, 120), Relu(), Linear(rng, 120, 84), Relu(), Linear(rng, 84, 10)]
    return train(layers, xtr, ytr, epochs=8, rng=rng)


def build_cifar(rng, xtr, ytr):
    layers = [Conv(rng, 3, 16, 3, 1), BatchNorm(16), Relu(), MaxPool2(),
              Conv(rng, 16, 32, 3, 1), BatchNorm(32), Relu(), MaxPool2(),
              Conv(rng, 32, 64, 3, 1), BatchNorm(64), Relu(), MaxPool2(), Flatten(),
              Linear(rng, 1024, 64), Relu(), Linear(rng, 64, 10)]
    return train(layers, xtr, ytr, epochs=6, rng=rng)


def build_seq1d(rng, xtr, ytr):
    layers = [Conv1d(rng, 8, 32, 3, 1), BatchNorm1d(32), Relu(), MaxPool1d2(),
              Conv1d(rng, 32, 64, 3, 1), BatchNorm1d(64), Relu(), MaxPool1d2(), Flatten(),
              Linear(rng, 128, 10)]
    return train(layers, xtr, ytr, epochs=12, rng=rng)


def build_mlp(xtr, ytr):
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.neural_network import MLPClassifier

    clf = MLPClassifier(hidden_layer_sizes=(64,), max_iter=400, random_state=SEED).fit(xtr, ytr)
    m = to_onnx(clf, initial_types=[("input", FloatTensorType([None, 64]))], options={id(clf): {"zipmap": False}},
                target_opset={"": 13, "ai.onnx.ml": 3})
    return prune_to(m, "probabilities"), clf


def prune_to(m: onnx.ModelProto, keep: str) -> onnx.ModelProto:
    """Keep only output ``keep`` and the nodes, initializers and opsets it needs."""
    g = m.graph
    needed, nodes = {keep}, []
    for n in reversed(list(g.node)):
        if any(o in needed for o in n.output):
            nodes.append(n)
            needed.update(i for i in n.input if i)
    nodes.reverse()
    del g.node[:]
    g.node.extend(nodes)
    outs = [o for o in g.output if o.name == keep]
    del g.output[:]
    g.output.extend(outs)
    inits = [t for t in g.initializer if t.name in needed]
    del g.initializer[:]
    g.initializer.extend(inits)
    domains = {n.domain for n in nodes}
    ops = [o for o in m.opset_import if o.domain in domains or o.domain == ""]
    del m.opset_import[:]
    m.opset_import.extend(ops)
    onnx.checker.check_model(m, full_check=True)
    return m


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=sorted(DIGITS_MODELS), help="rebuild this model only")
    only = ap.parse_args().only
    FIXTURES.mkdir(parents=True, exist_ok=True)
    xtr, xte, ytr, yte = load_split()
    own = {}
    if only is None:
        np.savez_compressed(FIXTURES / "digits_test.npz", images=xte, labels=yte)
        rng = np.random.default_rng(SEED)
        _, lenet_in, _ = DIGITS_MODELS["lenet5"]
        _, cifar_in, _ = DIGITS_MODELS["cifar"]
        _, mlp_in, _ = DIGITS_MODELS["mlp"]

        lenet = build_lenet(rng, lenet_in(xtr), ytr)
        onnx.save(export_cnn("lenet5_digits", lenet, [1, 32, 32], "probabilities", True, True), FIXTURES / "lenet5_digits.onnx")
        cifar = build_cifar(rng, cifar_in(xtr), ytr)
        onnx.save(export_cnn("cifar_digits", cifar, [3, 32, 32], "logits", False, False), FIXTURES / "cifar_digits.onnx")
        mlp, clf = build_mlp(mlp_in(xtr), ytr)
        onnx.save(mlp, FIXTURES / "mlp_digits.onnx")
        own = {"lenet5": eval_layers(lenet, lenet_in(xte)), "cifar": eval_layers(cifar, cifar_in(xte)),
               "mlp": clf.predict_proba(mlp_in(xte))}
    if only in (None, "seq1d"):
        # Its own generator: rebuilding it leaves the other models' bytes as they are.
        _, seq_in, _ = DIGITS_MODELS["seq1d"]
        seq = build_seq1d(np.random.default_rng(SEED + 1), seq_in(xtr), ytr)
        onnx.save(export_seq1d(seq), FIXTURES / "seq1d_digits.onnx")
        own["seq1d"] = eval_layers(seq, seq_in(xte))

    for name, (fname, to_input, out) in DIGITS_MODELS.items():
        if only not in (None, name):
            continue
        ref = ort_run(FIXTURES / fname, {"input": to_input(xte)})[out]
        np.save(FIXTURES / f"{name}_reference.npy", ref)
        size = (FIXTURES / fname).stat().st_size
        print(f"{name}: {fname} {size} bytes, onnxruntime test accuracy {accuracy(ref, yte):.2f}%")
    for name, scores in own.items():
        ref = np.load(FIXTURES / f"{name}_reference.npy")
        print(f"{name}: trainer's own accuracy {accuracy(scores, yte):.2f}%, argmax agrees with onnxruntime on "
              f"{np.mean(scores.argmax(1) == ref.argmax(1)):.2%}")

if __name__ == "__main__":
    main()
