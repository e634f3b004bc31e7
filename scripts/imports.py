#!/usr/bin/env python3
"""Prints the import circles among plait's modules: strongly connected components of the
graph "file A names crate::X" (any `crate::`/`super::` path, in `use` or inline), at the
level of files and of top-level modules (`<crate>/src/<name>`), ignoring tests, for each
crate of the workspace (`src/` and `crates/*/src/`; cargo itself refuses circles between
crates). Without SRC_DIR it looks at every crate and exits 1 when any has a circle (CI runs
it so). Usage: scripts/imports.py [SRC_DIR]"""
import os
import re
import sys

if len(sys.argv) < 2:
    import glob
    import subprocess
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    circles = 0
    for crate in [os.path.join(root, "src")] + sorted(glob.glob(os.path.join(root, "crates", "*", "src"))):
        print(f"{os.path.relpath(os.path.dirname(crate), root) if crate != os.path.join(root, 'src') else 'plait-cli (src)'}:")
        out = subprocess.run([sys.executable, os.path.abspath(__file__), crate], capture_output=True, text=True, check=True).stdout
        print("".join("  " + line + "\n" for line in out.splitlines()), end="")
        circles += sum(1 for line in out.splitlines() if line.startswith("  ") and line.strip()[:1].isdigit())
    if circles:
        print(f"{circles} circle(s) among the modules: break each (a shared item moves to the lower module)")
    sys.exit(1 if circles else 0)
src = os.path.normpath(sys.argv[1])

def module_of(path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel

files = {}
for root, _, names in os.walk(src):
    for name in names:
        if name.endswith(".rs"):
            path = os.path.join(root, name)
            files[tuple(module_of(path))] = path

def resolve(start, parts):
    # the longest prefix of parts naming a module file
    for n in range(len(parts), 0, -1):
        if tuple(start + parts[:n]) in files:
            return tuple(start + parts[:n])
    return None

PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super)::\{([^}]*)\}")

def strip_tests(text):
    # drop `#[cfg(test)] mod tests { ... }` blocks and `mod tests;` files
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)

edges = {m: set() for m in files}
for mod, path in files.items():
    if mod and mod[-1] == "tests":
        continue
    text = strip_tests(open(path, encoding="utf-8").read())
    text = re.sub(r"//.*", "", text)
    here = list(mod) if os.path.basename(path) in ("mod.rs", "lib.rs", "main.rs") else list(mod)
    parent = here[:-1]
    found = []
    for m in GROUP.finditer(text):
        base = [] if m.group(1) == "crate" else parent
        for item in m.group(2).split(","):
            item = item.strip().split(" as ")[0]
            if item and item != "self":
                found.append((base, item.split("::")))
    for m in PATH.finditer(text):
        base = [] if m.group(1) == "crate" else parent
        found.append((base, m.group(2).strip(":").split("::")))
    # in a module's own file, `self::x` and bare `x::` name its child modules
    if os.path.basename(path) in ("mod.rs", "lib.rs", "main.rs"):
        for child in [k for k in files if len(k) == len(mod) + 1 and k[:len(mod)] == mod]:
            if re.search(r"(?<![:\w])(self::)?" + child[-1] + r"::", text):
                found.append((list(mod), [child[-1]]))
    for base, parts in found:
        target = resolve(base, parts)
        if target is not None and target != mod:
            edges[mod].add(target)

def sccs(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out

name = lambda m: "::".join(m) or "crate"
print("file-level circles:")
for comp in sccs(edges):
    print(f"  {len(comp)}: " + ", ".join(name(m) for m in comp))
top = {}
for m, ts in edges.items():
    if not m:
        continue
    a = m[0]
    top.setdefault(a, set())
    for t in ts:
        if t and t[0] != a and a not in ("cli", "main"):
            top[a].add(t[0])
print("top-level circles:")
for comp in sccs(top):
    print(f"  {len(comp)}: " + ", ".join(comp))
