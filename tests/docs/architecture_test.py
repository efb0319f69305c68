#!/usr/bin/env python3
"""Keeps docs/ARCHITECTURE.md's file tables true to the tree.

Every .cc and .h file under stack/, drivers/ and apps/ has its line in the
tables of "## Files" (STYLE: one line per file), and every file those tables
name exists. A name like `timer_wheel.h/.cc` stands for both files; under
"### stack/<layer>" names are relative to that layer, under "### drivers" to
drivers/, and under "### apps" to the folder in the row's first column.
Also checks that the layers table names exactly the layers of stack/meson.build.

Usage: architecture_test.py SOURCE_ROOT
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
text = (root / "docs" / "ARCHITECTURE.md").read_text()
errors = []

files_part = text.split("## Files", 1)[1].split("\n## ", 1)[0]
named = set()
for section in re.split(r"\n### ", files_part)[1:]:
    heading, body = section.split("\n", 1)
    m = re.match(r"stack/(\w+)", heading)
    base = f"stack/{m.group(1)}/" if m else "drivers/" if heading.startswith("drivers") else "apps/"
    folder = ""
    for row in body.splitlines():
        if not row.startswith("|") or set(row) <= set("|- "):
            continue
        cells = [c.strip() for c in row.strip("|").split("|")]
        if base == "apps/":
            if cells[0].startswith("`"):
                folder = cells[0].strip("`")
            names_cell = cells[1]
        else:
            names_cell = cells[0]
        for tok in re.findall(r"`([^`]+)`", names_cell):
            if tok in ("file", "files"):
                continue
            stem, exts = (tok.split(".", 1) + [""])[:2]
            for ext in exts.replace("/.", "/").split("/"):
                named.add(f"{base}{folder}{stem}.{ext}")

actual = {str(p.relative_to(root)) for d in ("stack", "drivers", "apps") for p in (root / d).rglob("*")
          if p.suffix in (".cc", ".h")}
for f in sorted(actual - named):
    errors.append(f"{f} has no line in docs/ARCHITECTURE.md's file tables")
for f in sorted(named - actual):
    errors.append(f"docs/ARCHITECTURE.md names {f}, which does not exist")

layers = re.search(r"layers = \[([^\]]*)\]", (root / "stack" / "meson.build").read_text()).group(1)
declared = re.findall(r"'(\w+)'", layers)
table = re.findall(r"^\| `(\w+)` \|", text.split("What each layer uses", 1)[1].split("\n\n", 2)[1], re.M)
if table != declared:
    errors.append(f"the layers table lists {table}, stack/meson.build builds {declared}")

for e in errors:
    print("FAIL: " + e)
print(f"architecture: {len(actual)} files, {len(named)} named, {len(errors)} problems")
sys.exit(1 if errors else 0)
