"""Hostile inputs through Python, issue 25 class 1: a FIFO wherever tensorvault reads a
file is refused at once with a TensorvaultError naming the path and "FIFO" (opening a
FIFO used to block forever). Each case runs in a child interpreter under a 20 s timeout,
so a regression fails the test instead of hanging the suite."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorvault as tv

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")


def _refused(code: str, fifo: str) -> None:
    """Run ``code`` (with ``tv`` imported) in a child; it must raise a TensorvaultError whose
    message names ``fifo`` and says FIFO."""
    script = textwrap.dedent(
        """
        import sys, tensorvault as tv
        try:
        {body}
        except tv.TensorvaultError as e:
            print(type(e).__name__ + ": " + str(e))
            sys.exit(0)
        print("no error")
        sys.exit(1)
        """
    ).format(body=textwrap.indent(textwrap.dedent(code), "    "))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stdout + p.stderr
    assert fifo in p.stdout and "FIFO" in p.stdout, p.stdout


def test_format_inputs(tmp_path):
    f = str(tmp_path / "in")
    os.mkfifo(f)
    _refused(f"tv.load_cvc({f!r})", f)
    _refused(f"tv.get_cvc_info({f!r})", f)
    _refused(f"tv.read_mobi({f!r})", f)


def test_registry_inputs(tmp_path):
    single = str(tmp_path / "m.safetensors")
    os.mkfifo(single)
    reg = str(tmp_path / "reg")
    _refused(f"tv.ModelRegistry({reg!r}).save({single!r})", single)
    hf = tmp_path / "hf"
    hf.mkdir()
    os.mkfifo(hf / "model.safetensors")
    _refused(f"tv.ModelRegistry({reg!r}).save({str(hf)!r})", str(hf / "model.safetensors"))
    assert tv.ModelRegistry(reg).list_versions() == []


def test_store_files(tmp_path):
    root = str(tmp_path / "st")
    s = tv.Store(root, "t", "c")
    s.put_tensor("x", np.ones((4, 8), dtype=np.float32))
    del s
    meta = os.path.join(root, "t", "c", "meta.log")
    os.remove(meta)
    os.mkfifo(meta)
    _refused(f"tv.Store({root!r}, 't', 'c')", meta)
    _refused(f"tv.Store({root!r}, 't', 'c', create=False)", meta)
