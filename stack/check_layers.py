#!/usr/bin/env python3
"""Checks that the files of one stack layer include only what the layer may use.

The stack is built as one static library per directory (stack/meson.build),
each declaring the layers below it that it uses; the include arrows must
follow those declarations, downward only. A file of layer L may include:
  - <uroce/...> (the public API) and system headers,
  - "stack/X/..." where X is L or one of the layers L may use (--allow).
It may never include "apps/", "drivers/" or "tests/" headers.

Usage: check_layers.py --layer L --allow A,B,... [--stamp OUT] FILE...
Exits 1 and names every offending line if any include breaks the rule;
otherwise writes the stamp (a generated header the layer's library depends
on, so the build stops before compiling a layer that breaks it) and exits 0.
"""
import argparse
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def violations(path, layer, allowed):
    """Yields (line number, included path, reason) for each forbidden include of path."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1)
            top = inc.split("/", 1)[0]
            if top in ("apps", "drivers", "tests"):
                yield n, inc, f"the stack never includes {top}/"
            elif top == "stack":
                parts = inc.split("/")
                if len(parts) < 3:
                    yield n, inc, "not a stack/<layer>/<file> path"
                elif parts[1] not in allowed:
                    yield n, inc, (f"layer {layer} does not use layer {parts[1]} "
                                   f"(it uses: {', '.join(sorted(allowed - {layer})) or 'nothing'})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", required=True)
    ap.add_argument("--allow", default="", help="comma-separated layers the layer may use")
    ap.add_argument("--stamp", help="file to write when the check passes")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    allowed = {a.layer} | {x for x in a.allow.split(",") if x}
    bad = 0
    for path in a.files:
        for n, inc, why in violations(path, a.layer, allowed):
            print(f"{path}:{n}: upward or foreign include \"{inc}\": {why}", file=sys.stderr)
            bad += 1
    if bad:
        print(f"check_layers: {bad} include(s) break the layering of stack/{a.layer} "
              "(docs/ARCHITECTURE.md, 'Layers')", file=sys.stderr)
        return 1
    if a.stamp:
        with open(a.stamp, "w", encoding="utf-8") as f:
            f.write(f"// stack/{a.layer}: includes checked against layers {sorted(allowed)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
