"""Fixtures of the MOBI real-model checks: the models (committed digits fixtures, the
rebuilt EfficientNet-Lite0), their inputs and onnxruntime references, and the report of
every check (written to target/mobi-models/report.md and printed at the end)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mobi_common import DIGITS_MODELS, FIXTURES, WEIGHTS_MODES, digits_test, work_dir  # noqa: E402

REPORT: Dict[str, Dict[str, dict]] = {}


class RealModel:
    """One model under test: ONNX path, input name and array, output name, reference."""

    def __init__(self, name, onnx_path, input_name, x, output, reference, labels=None):
        self.name, self.onnx_path, self.input_name = name, Path(onnx_path), input_name
        self.x, self.output, self.reference, self.labels = x, output, reference, labels


@pytest.fixture(scope="session")
def digits():
    return digits_test()


def _digits_model(name: str, digits) -> RealModel:
    fname, to_input, out = DIGITS_MODELS[name]
    return RealModel(name, FIXTURES / fname, "input", to_input(digits["images"]), out,
                     np.load(FIXTURES / f"{name}_reference.npy"), digits["labels"])


@pytest.fixture(scope="session")
def effnet() -> RealModel:
    import build_efficientnet

    d = work_dir()
    path = d / "efficientnet_lite0.onnx"
    if not (path.exists() and (d / "effnet_reference.npy").exists() and (d / "effnet_crops.npy").exists()):
        build_efficientnet.build(d)
    return RealModel("efficientnet_lite0", path, "images", np.load(d / "effnet_crops.npy"), "logits",
                     np.load(d / "effnet_reference.npy"))


MODEL_NAMES = [*DIGITS_MODELS, "efficientnet_lite0"]


@pytest.fixture(scope="session", params=MODEL_NAMES)
def real_model(request, digits) -> RealModel:
    if request.param == "efficientnet_lite0":
        return request.getfixturevalue("effnet")
    return _digits_model(request.param, digits)


@pytest.fixture(params=WEIGHTS_MODES)
def weights(request) -> str:
    return request.param


def record(model: str, mode: str, surface: str, **values) -> None:
    """Add a row to the report (model x weights mode x surface)."""
    REPORT.setdefault(f"{model} {mode}", {})[surface] = values


def pytest_terminal_summary(terminalreporter):
    if not REPORT:
        return
    lines = ["| model | weights | via | size vs ONNX | max abs diff (scaled) | top-1 agreement | accuracy (ONNX) |",
             "|---|---|---|---|---|---|---|"]
    for key in sorted(REPORT):
        model, mode = key.split(" ")
        for surface, v in sorted(REPORT[key].items()):
            size = f"{v['size']:,} B ({v['size_ratio']:.1%})" if "size" in v else "-"
            acc = f"{v['accuracy']:.2f}% ({v['onnx_accuracy']:.2f}%)" if v.get("accuracy") is not None else "-"
            lines.append(f"| {model} | {mode} | {surface} | {size} | {v['max_abs_diff']:.2e} | "
                         f"{v['agreement']:.2%} | {acc} |")
    text = "\n".join(lines)
    (work_dir() / "report.md").write_text(text + "\n")
    (work_dir() / "report.json").write_text(json.dumps(REPORT, indent=1, sort_keys=True))
    terminalreporter.write_sep("=", "MOBI vs onnxruntime (per model and weights mode)")
    terminalreporter.write_line(text)
