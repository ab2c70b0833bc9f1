#!/usr/bin/env python3
"""Execute the fenced blocks of README.md, so the README runs as written.

    usage: scripts/readme_test.py TENSORVAULT_BIN [--python PY] [--readme README.md]

- ```python blocks run as they are, one after the other in one fresh directory, with
  PY (a venv where the tensorvault wheel and numpy are installed).
- ```sh blocks run line by line; each command must be listed in SH_COMMANDS below, which
  says how it runs here (the demo shrunk with flags, so it takes seconds) or why it is
  not run by this test (the test command itself, the wheel build that the calling
  stage already did). An unlisted command fails the test: a new README command needs a
  decision here.
- ```text blocks (the CLI at a glance): every `tensorvault GROUP VERB` named must exist
  (`tensorvault GROUP VERB --help` exits 0).
- ```rust blocks are API sketches (they use names they do not define): listed as
  skipped with that reason; the API is tested by the crates' own tests.

Prints one line per block (README line, language, outcome) and exits 1 on the first
failure, with the block's output.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# README sh command (comment stripped) -> ("run", argv template) | ("skip", reason).
# {tv} is the tensorvault binary, {tmp} the block's scratch directory.
SH_COMMANDS = {
    "cargo run --release -p tensorvault-cli -- demo": (
        "run",
        "{tv} -q demo {tmp}/demo --rows 2000 --dim 64 --chunk-size 500",
    ),
    "scripts/test.sh": ("skip", "the test command itself (this test runs inside it)"),
    "scripts/build_wheel.sh": (
        "skip",
        "built by scripts/test.sh's python stage; its wheel is what this test's venv runs",
    ),
    "pip install target/wheels/tensorvault-*.whl": (
        "skip",
        "done by scripts/test.sh's python stage in a venv without Rust",
    ),
}


# Sections whose blocks another test runs (in its own environment), by heading.
DELEGATED = {
    "## Bring your ONNX model": "tests/mobi_models/test_readme_section.py (run by tests/mobi_models/run.sh, "
    "with onnx fixtures and the wheel)",
}


def delegated(text: str, line: int):
    """The test that runs the block starting at 1-based `line`, if its section is delegated."""
    heading = None
    for l in text.splitlines()[: line - 1]:
        if l.startswith("## "):
            heading = l.strip()
    return DELEGATED.get(heading)


def blocks(text: str):
    """(language, first line number, body) of every fenced block."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            start = i + 1
            j = start
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append((m.group(1) or "text", start + 1, "\n".join(lines[start:j]) + "\n"))
            i = j + 1
        else:
            i += 1
    return out


def fail(where: str, msg: str, output: str = "") -> None:
    print(f"{where}: FAILED: {msg}")
    if output:
        print(output.rstrip())
    sys.exit(1)


def run_python(where: str, body: str, py: str, work: Path, n: int) -> str:
    script = work / f"readme_block_{n}.py"
    script.write_text(body)
    t = time.monotonic()
    r = subprocess.run([py, str(script)], cwd=work, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        fail(where, f"python exited {r.returncode}", r.stdout + r.stderr)
    return f"ran ({time.monotonic() - t:.1f} s, {len(body.splitlines())} lines)"


def run_sh(where: str, body: str, tv: str, work: Path) -> str:
    done = []
    for line in body.splitlines():
        cmd = line.split("#", 1)[0].strip()
        if not cmd:
            continue
        rule = SH_COMMANDS.get(cmd)
        if rule is None:
            fail(where, f"command {cmd!r} is not in scripts/readme_test.py SH_COMMANDS (run it how?)")
        kind, what = rule
        if kind == "skip":
            done.append(f"{cmd!r} skipped: {what}")
            continue
        argv = [a.format(tv=tv, tmp=work) for a in shlex.split(what)]
        t = time.monotonic()
        r = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            fail(where, f"{' '.join(argv)} exited {r.returncode}", r.stdout + r.stderr)
        done.append(f"{cmd!r} ran as {' '.join(argv[1:])} ({time.monotonic() - t:.1f} s)")
    return "; ".join(done)


def check_cli(where: str, body: str, tv: str) -> str:
    seen = []
    for line in body.splitlines():
        words = line.split()
        if len(words) < 2 or words[0] != "tensorvault":
            continue
        group = words[1]
        verbs = []
        if len(words) > 2 and re.match(r"^[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*$", words[2]):
            verbs = words[2].split("|")
        for verb in verbs or [None]:
            argv = [tv, group] + ([verb] if verb else []) + ["--help"]
            if (group, verb) in seen:
                continue
            r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                fail(where, f"`{' '.join(argv[1:])}` failed: the README names a command that does not exist", r.stderr)
            seen.append((group, verb))
    return f"{len(seen)} commands exist (--help)" if seen else "no commands"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tv", help="the tensorvault binary")
    ap.add_argument("--python", default=sys.executable, help="python with the wheel installed")
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    a = ap.parse_args()
    tv = os.path.abspath(a.tv)
    py = os.path.abspath(a.python) if os.sep in a.python else a.python
    readme = Path(a.readme)
    found = blocks(readme.read_text())
    if not found:
        fail(str(readme), "no fenced blocks found")
    with tempfile.TemporaryDirectory(prefix="readme-test-") as tmp:
        work = Path(tmp)
        for n, (lang, line, body) in enumerate(found):
            where = f"{readme.name}:{line} {lang}"
            runner = delegated(readme.read_text(), line)
            if runner:
                outcome = f"run by {runner}"
            elif lang == "python":
                outcome = run_python(where, body, py, work, n)
            elif lang == "sh":
                outcome = run_sh(where, body, tv, work)
            elif lang == "text":
                outcome = check_cli(where, body, tv)
            elif lang == "rust":
                outcome = "skipped: an API sketch (names it does not define); the crates' tests cover the API"
            else:
                fail(where, f"no rule for ```{lang} blocks")
            print(f"{where}: {outcome}")
    print(f"README: {len(found)} blocks checked")


if __name__ == "__main__":
    main()
