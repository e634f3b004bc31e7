#!/usr/bin/env python3
"""Prints the longest functions of the workspace's crates (`src/` and `crates/*/src/`; lines
from `fn` to its closing brace), tests excluded. Usage: scripts/longest.py [N] [SRC_DIR]"""
import glob
import os
import re
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
root = os.path.join(os.path.dirname(__file__), "..")
srcs = [sys.argv[2]] if len(sys.argv) > 2 else [os.path.join(root, "src")] + sorted(glob.glob(os.path.join(root, "crates", "*", "src")))
found = []
for path in [p for src in srcs for p in glob.glob(os.path.join(src, "**", "*.rs"), recursive=True)]:
    if path.endswith("tests.rs"):
        continue
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].startswith("#[cfg(test)]"):
            break
        m = re.match(r"^(\s*)(pub(\([a-z]+\))? )?(async )?(unsafe )?fn (\w+)", lines[i])
        if not m:
            i += 1
            continue
        indent, name = m.group(1), m.group(6)
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
            j += 1
        if j < len(lines) and lines[j].rstrip().endswith(";"):
            i = j + 1
            continue
        k = j + 1
        while k < len(lines) and lines[k].rstrip() != indent + "}":
            k += 1
        found.append((k - i + 1, os.path.relpath(path, root), name))
        i = j + 1
for length, path, name in sorted(found, reverse=True)[:n]:
    print(f"{length:5}  {path}  {name}")
