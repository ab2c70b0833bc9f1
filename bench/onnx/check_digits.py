"""ONNX import accuracy on the real digits models: every weights mode vs onnxruntime's
committed outputs (tests/mobi_models/fixtures), evaluated with the numpy evaluator of
crates/tensorvault-py/tests/test_onnx.py. Needs the tensorvault package and the test venv of
tests/mobi_models (onnx). Usage: python bench/onnx/check_digits.py"""
import sys, numpy as np, tempfile, os
sys.path.insert(0, 'tests/mobi_models'); sys.path.insert(0, 'crates/tensorvault-py/tests')
import tensorvault as tv
from mobi_common import DIGITS_MODELS
from test_onnx import run
z = np.load('tests/mobi_models/fixtures/digits_test.npz')
imgs, labels = z['images'], z['labels']
for name, (f, to_in, out) in DIGITS_MODELS.items():
    ref = np.load(f'tests/mobi_models/fixtures/{name}_reference.npy')
    x = to_in(imgs)
    for w in ['f32', 'fp16', 'int16', 'int8']:
        d = tempfile.mkdtemp()
        m = tv.convert_onnx(f'tests/mobi_models/fixtures/{f}', os.path.join(d, 'm.mobi'), weights=w)
        try:
            y = run(m, x)
        except AssertionError as e:
            print(name, w, 'evaluator:', e); break
        diff = np.abs(y - ref).max() / max(1.0, np.abs(ref).max())
        agree = np.mean(y.argmax(1) == ref.argmax(1)); acc = np.mean(y.argmax(1) == labels); racc = np.mean(ref.argmax(1) == labels)
        print(f'{name:7s} {w:5s} max|diff|/scale {diff:.2e}  top1 agreement {agree:.4f}  accuracy {acc:.4f} (onnxruntime {racc:.4f})')
