"""ONNX backend conformance through MOBI: every case is converted (`tensorvault mobi
convert`, f32 weights) and run (`tensorvault mobi run`), and its outputs are compared
with the expected ones at the tolerances onnx's own backend tests use (per case; by
default rtol 1e-3, atol 1e-7, NaN equal to NaN; integer and bool outputs exactly).

Cases (all from the onnx wheel, nothing downloaded):
- ``node/``: regenerated from the node-test generators (``onnx.backend.test.case.node``,
  numpy's global seed fixed at 0 first, so the data is the same every run);
- ``pytorch-converted/``, ``pytorch-operator/``, ``simple/``: the data directories the
  wheel ships (model.onnx + test_data_set_*/input_*.pb, output_*.pb).

MOBI keeps weights as constants, so each case is pre-processed in Python first: the
first graph input stays a runtime input; every other input becomes an initializer
holding its test-data value (one converted model per data set), and inputs that already
have an initializer are dropped from the input list; models older than opset 7 (the
pytorch-converted cases are opset 6) are first upgraded to opset 7 with onnx's
``version_converter``. A case passes when every data set passes.

Usage:
  python conformance.py               check: every case in conformance_passing.txt
                                      still passes (exit 1 naming those that do not)
  python conformance.py --all         run every case and print the per-op summary
  python conformance.py --all --write also rewrite conformance_passing.txt and
                                      conformance_summary.txt
  --jobs N (default 2), --filter SUBSTRING, --verbose (print each failure's reason)
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from mobi_common import HERE, CliError, cli_convert, cli_has, cli_run

MANIFEST = HERE / "conformance_passing.txt"
SUMMARY = HERE / "conformance_summary.txt"
DATA_SUITES = ("pytorch-converted", "pytorch-operator", "simple")
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-7


@dataclass
class Case:
    """One conformance case: its id (``suite/name``), model and data sets."""

    id: str
    model: onnx.ModelProto
    data_sets: List[Tuple[List[np.ndarray], List[np.ndarray]]]
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL

    @property
    def ops(self) -> List[str]:
        """The operators of the case's graph (Constant nodes aside), sorted."""
        return sorted({n.op_type for n in self.model.graph.node if n.op_type != "Constant"}) or ["Constant"]


def _as_array(v) -> Optional[np.ndarray]:
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, (np.generic, float, int, bool)):
        return np.asarray(v)
    return None  # sequences, maps, optionals: not tensors


def node_cases(name_filter: str = "") -> Iterator[Case]:
    """The node cases, regenerated (numpy seeded) from the wheel's generators."""
    import onnx.backend.test.case.node as node

    np.random.seed(0)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        cases = node.collect_testcases()
    for c in cases:
        if name_filter and name_filter not in c.name:
            continue
        sets = []
        for inputs, outputs in c.data_sets or []:
            ins = [_as_array(v) for v in inputs]
            outs = [_as_array(v) for v in outputs]
            if any(v is None for v in ins + outs):
                sets = []
                break
            sets.append((ins, outs))
        if sets:
            yield Case(f"node/{c.name}", c.model, sets, c.rtol, c.atol)


def data_cases(name_filter: str = "") -> Iterator[Case]:
    """The cases of the data directories the onnx wheel ships."""
    base = Path(onnx.__file__).parent / "backend" / "test" / "data"
    for suite in DATA_SUITES:
        for d in sorted((base / suite).glob("*")):
            if name_filter and name_filter not in d.name or not (d / "model.onnx").exists():
                continue
            model = onnx.load(d / "model.onnx")
            sets = []
            for ds in sorted(d.glob("test_data_set_*")):
                ins, outs = [], []
                for kind, acc in (("input", ins), ("output", outs)):
                    for p in sorted(ds.glob(f"{kind}_*.pb"), key=lambda p: int(p.stem.split("_")[1])):
                        t = onnx.TensorProto()
                        try:
                            t.ParseFromString(p.read_bytes())
                            acc.append(numpy_helper.to_array(t))
                        except Exception:  # a sequence or map: not a tensor case
                            acc.append(None)
                if any(v is None for v in ins + outs):
                    sets = []
                    break
                sets.append((ins, outs))
            if sets:
                yield Case(f"{suite}/{d.name}", model, sets)


def all_cases(name_filter: str = "") -> Iterator[Case]:
    yield from node_cases(name_filter)
    yield from data_cases(name_filter)


MIN_OPSET = 7


def upgraded(model: onnx.ModelProto) -> onnx.ModelProto:
    """Models older than opset 7 (the 2017 pytorch-converted cases are opset 6) upgraded
    to opset 7 by onnx's own version converter; others unchanged. A model the converter
    cannot upgrade is returned as it is (the importer then refuses its opset)."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), MIN_OPSET)
    if opset >= MIN_OPSET:
        return model
    from onnx import version_converter

    try:
        return version_converter.convert_version(model, MIN_OPSET)
    except Exception:
        return model


def constant_weights(model: onnx.ModelProto, inputs: List[np.ndarray]) -> Tuple[onnx.ModelProto, Dict[str, np.ndarray]]:
    """The model (opset >= 7, see ``upgraded``) with every graph input but the first
    turned into an initializer (its test value), and the runtime feed for the first."""
    m = onnx.ModelProto()
    m.CopyFrom(upgraded(model))
    g = m.graph
    have_init = {t.name for t in g.initializer}
    runtime = [i for i in g.input if i.name not in have_init]
    feeds: Dict[str, np.ndarray] = {}
    keep = []
    for k, vi in enumerate(runtime):
        value = inputs[k]
        if k == 0:
            feeds[vi.name] = value
            keep.append(vi)
        else:
            g.initializer.append(numpy_helper.from_array(np.asarray(value), vi.name))
    del g.input[:]
    g.input.extend(keep)
    m.ir_version = max(m.ir_version, 4)  # initializers need not be graph inputs from IR 4
    return m, feeds


def close(expected: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> Optional[str]:
    """None when ``got`` matches ``expected`` as the backend tests require, else why not."""
    if expected.shape != got.shape:
        return f"shape {got.shape} != expected {expected.shape}"
    if expected.dtype.kind in "fc":
        try:
            np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)
        except AssertionError:
            err = np.nanmax(np.abs(got.astype(np.float64) - expected.astype(np.float64)), initial=0.0)
            return f"values differ (max abs diff {err:.3g})"
        return None
    if not np.array_equal(got.astype(expected.dtype), expected) or not np.array_equal(got, expected.astype(got.dtype)):
        return "integer/bool values differ"
    return None


def run_case(case: Case, tmp: Path) -> Tuple[str, str]:
    """("pass" | "unsupported" | "fail", reason) for one case."""
    for k, (inputs, expected) in enumerate(case.data_sets):
        model, feeds = constant_weights(case.model, inputs)
        src = tmp / f"{k}.onnx"
        dst = tmp / f"{k}.mobi"
        onnx.save(model, src)
        try:
            cli_convert(src, dst, "f32")
        except CliError as e:
            return "unsupported", e.stderr.strip().splitlines()[-1] if e.stderr.strip() else f"exit {e.code}"
        try:
            got = cli_run(dst, feeds, tmp / f"out{k}")
        except CliError as e:
            return "fail", "run: " + (e.stderr.strip().splitlines()[-1] if e.stderr.strip() else f"exit {e.code}")
        for vi, exp in zip(model.graph.output, expected):
            if vi.name not in got:
                return "fail", f"output {vi.name} not written"
            why = close(exp, got[vi.name], case.rtol, case.atol)
            if why:
                return "fail", f"{vi.name}: {why}"
    return "pass", ""


def run_all(cases: List[Case], jobs: int) -> Dict[str, Tuple[str, str]]:
    def one(case: Case):
        with tempfile.TemporaryDirectory(prefix="mobi-conf-") as tmp:
            try:
                return case.id, run_case(case, Path(tmp))
            except Exception as e:  # a harness problem is a failure of that case, reported
                return case.id, ("fail", f"harness: {type(e).__name__}: {e}")

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(pool.map(one, cases))


def read_manifest() -> List[str]:
    if not MANIFEST.exists():
        return []
    return [l.strip() for l in MANIFEST.read_text().splitlines() if l.strip() and not l.startswith("#")]


def summary_table(cases: List[Case], results: Dict[str, Tuple[str, str]]) -> str:
    """Per operator: how many cases using it pass, fail, or are refused by the converter."""
    per_op: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for c in cases:
        for op in c.ops:
            per_op[op][results[c.id][0]] += 1
    lines = [f"{'operator':<32} {'pass':>5} {'fail':>5} {'unsup':>5}"]
    for op in sorted(per_op):
        n = per_op[op]
        lines.append(f"{op:<32} {n['pass']:>5} {n['fail']:>5} {n['unsupported']:>5}")
    tot = collections.Counter(s for s, _ in results.values())
    lines.append(f"{'cases (' + str(len(results)) + ')':<32} {tot['pass']:>5} {tot['fail']:>5} {tot['unsupported']:>5}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--all", action="store_true", help="run every case, not only the manifest's")
    ap.add_argument("--write", action="store_true", help="with --all: rewrite the manifest and summary")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--filter", default="")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    if not (cli_has("mobi", "convert") and cli_has("mobi", "run")):
        print("conformance: skipped: this tensorvault has no `mobi convert` / `mobi run` yet")
        return 0
    listed = read_manifest()
    cases = list(all_cases(args.filter))
    if not args.all:
        wanted = set(listed)
        cases = [c for c in cases if c.id in wanted]
        missing = wanted - {c.id for c in cases}
        if missing:
            print(f"conformance: {len(missing)} listed cases no longer exist: {sorted(missing)[:5]}", file=sys.stderr)
            return 1
    results = run_all(cases, args.jobs)
    passing = sorted(k for k, (s, _) in results.items() if s == "pass")
    if args.verbose:
        for k in sorted(results):
            s, why = results[k]
            if s != "pass":
                print(f"{s:<11} {k}: {why}")
    if args.all:
        table = summary_table(cases, results)
        print(table)
        if args.write:
            MANIFEST.write_text("\n".join(passing) + "\n")
            SUMMARY.write_text(
                "# ONNX backend cases through tensorvault mobi convert + run (f32 weights);\n"
                "# made by: python tests/mobi_models/conformance.py --all --write\n"
                "# per operator: cases whose graph uses it (a case counts once per operator it uses)\n" + table + "\n"
            )
    regressed = sorted(k for k in listed if k in results and results[k][0] != "pass")
    for k in regressed:
        print(f"REGRESSED {k}: {results[k][1]}", file=sys.stderr)
    print(f"conformance: {len(passing)} of {len(results)} cases pass; {len(listed)} listed, {len(regressed)} regressed")
    return 1 if regressed else 0


if __name__ == "__main__":
    sys.exit(main())
