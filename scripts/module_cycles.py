#!/usr/bin/env python3
"""Print import cycles between the top-level modules of a crate's src/ (and exit 1 if any).

A module's imports are the `crate::NAME` paths in its files outside comments and
`#[cfg(test)] mod tests`. Usage: scripts/module_cycles.py crates/NAME/src
"""
import glob
import os
import re
import sys


def grouped(code):
    """First path segments inside `crate::{...}` groups (nested groups included)."""
    out = set()
    for m in re.finditer(r"crate::\{", code):
        depth, i, start = 1, m.end(), m.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        body, level, item = code[start : i - 1], 0, ""
        for ch in body + ",":
            if ch == "{":
                level += 1
            elif ch == "}":
                level -= 1
            if ch == "," and level == 0:
                name = re.split(r"::|\s+as\s+", item.strip())[0].strip()
                if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name != "self":
                    out.add(name)
                item = ""
            else:
                item += ch
    return out


def imports(root):
    mods = {}
    for f in glob.glob(os.path.join(root, "**/*.rs"), recursive=True):
        rel = os.path.relpath(f, root)
        top = rel.split(os.sep)[0].removesuffix(".rs")
        if top in ("lib", "main"):
            continue
        text = re.split(r"#\[cfg\(test\)\]\s*mod tests", open(f).read())[0]
        code = "\n".join(l.split("//")[0] for l in text.splitlines())
        deps = set(re.findall(r"crate::([a-z_][a-z0-9_]*)", code))
        deps |= grouped(code)
        deps -= {top}
        mods.setdefault(top, set()).update(deps)
    return {m: {d for d in deps if d in mods} for m, deps in mods.items()}


def cycles(graph):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    found = 0
    for root in sys.argv[1:]:
        for comp in cycles(imports(root)):
            print(f"{root}: import cycle among {', '.join(comp)}")
            found += 1
    sys.exit(1 if found else 0)
