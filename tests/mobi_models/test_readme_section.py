"""The README's "Bring your ONNX model" section (README.md, up to the next ``## ``) runs as
written: every ```sh block through bash (-euo pipefail) and every ```python block through
this venv's python, in order, in a scratch directory that holds the repository's
``tests/mobi_models/fixtures`` (the section's example model), with the tensorvault under
test first on PATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from mobi_common import ROOT, cli_has, tensorvault_bin

README = ROOT / "README.md"
HEADING = "## Bring your ONNX model"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def section() -> str:
    text = README.read_text()
    start = text.index(HEADING)
    end = text.find("\n## ", start + len(HEADING))
    return text[start:] if end < 0 else text[start:end]


def blocks():
    return [(lang, body) for lang, body in FENCE.findall(section()) if lang in ("sh", "python")]


def test_section_has_runnable_blocks():
    kinds = [lang for lang, _ in blocks()]
    assert "sh" in kinds and "python" in kinds, "the section shows both the CLI and Python"


@pytest.mark.skipif(not (cli_has("mobi", "convert") and cli_has("mobi", "run")),
                    reason="this tensorvault has no `mobi convert` / `mobi run` yet")
def test_section_runs_as_written(tmp_path):
    pytest.importorskip("tensorvault")
    import tensorvault

    if not hasattr(tensorvault, "convert_onnx"):
        pytest.skip("the installed tensorvault has no convert_onnx yet")
    (tmp_path / "tests" / "mobi_models").mkdir(parents=True)
    os.symlink(ROOT / "tests" / "mobi_models" / "fixtures", tmp_path / "tests" / "mobi_models" / "fixtures")
    bindir = tmp_path / ".bin"
    bindir.mkdir()
    os.symlink(tensorvault_bin(), bindir / "tensorvault")
    for name in ("python3", "python"):  # a wrapper, not a symlink: a venv is found from its path
        (bindir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        (bindir / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    for i, (lang, body) in enumerate(blocks()):
        argv = ["bash", "-euo", "pipefail", "-c", body] if lang == "sh" else [sys.executable, "-c", body]
        p = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"block {i} ({lang}) failed:\n{body}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"
