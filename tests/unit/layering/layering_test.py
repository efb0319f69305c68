#!/usr/bin/env python3
"""The layering check (stack/check_layers.py) against the real tree and planted includes.

argv: CHECKER SOURCE_ROOT LAYERS
  LAYERS: 'layer=used1,used2;layer2=...' as stack/meson.build declares them.

1. Every file of every layer passes with the layers meson declared.
2. A real file of stack/transport with one upward include planted (the
   device context, which sits above the transport) fails, naming the line.
3. So do an include of apps/ and of drivers/ from the stack, and an include
   of a layer the file's layer does not use (wire -> net, sideways-up).
4. The same real file without the planted line passes again (the check is
   about the include, not the file).
"""
import pathlib
import subprocess
import sys
import tempfile

checker, root, spec = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
uses = {k: v for k, v in (item.split("=", 1) for item in spec.split(";") if item)}
failures = []


def run(layer, files):
    return subprocess.run([sys.executable, checker, "--layer", layer, "--allow", uses[layer], *map(str, files)],
                          capture_output=True, text=True)


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


# 1. The real tree.
for layer in uses:
    files = sorted((root / "stack" / layer).glob("*.[ch]*"))
    r = run(layer, files)
    expect(r.returncode == 0 and files, f"stack/{layer}: {len(files)} files follow the declared layers {r.stderr.strip()}")

# 2-4. Planted includes in a copy of a real transport file.
real = (root / "stack/transport/requester.cc").read_text()
with tempfile.TemporaryDirectory() as tmp:
    cases = [
        ("transport", '#include "stack/device/context.h"\n', "layer transport does not use layer device"),
        ("transport", '#include "stack/engine/steering.h"\n', "layer transport does not use layer engine"),
        ("transport", '#include "apps/common/args.h"\n', "the stack never includes apps/"),
        ("device", '#include "drivers/dpdk/dpdk_io.h"\n', "the stack never includes drivers/"),
        ("wire", '#include "stack/net/gid_table.h"\n', "layer wire does not use layer net"),
    ]
    for i, (layer, line, why) in enumerate(cases):
        p = pathlib.Path(tmp) / f"planted_{i}.cc"
        lines = real.splitlines(keepends=True)
        at = next(n for n, l in enumerate(lines) if l.startswith("#include"))
        lines.insert(at, line)
        p.write_text("".join(lines))
        r = run(layer, [p])
        expect(r.returncode == 1 and why in r.stderr and f"{p}:{at + 1}:" in r.stderr,
               f"planted {line.strip()} in a {layer} file fails at line {at + 1}: {r.stderr.strip().splitlines()[0] if r.stderr else 'no message'}")
    clean = pathlib.Path(tmp) / "clean.cc"
    clean.write_text(real)
    expect(run("transport", [clean]).returncode == 0, "the same file without the planted line passes")

sys.exit(1 if failures else 0)
