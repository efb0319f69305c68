#!/usr/bin/env python3
"""Keeps docs/PROTOCOL.md true to the code.

1. Every relative link resolves: the file exists.
2. A link to a source file names what it points at, as `symbol` in the link
   text ([`chk_psn`](../stack/transport/responder.cc)); every such symbol
   occurs in that file as a whole identifier (or is the file's own name).
3. Every `uroce dump --explain` excerpt (a code block whose first line is
   "$ uroce dump ...") is what the tool prints today: each line of the block
   is a line of the command's output.
docs/PROTOCOL.md must keep its sections and a substantial number of code
and test links and excerpts, so that emptying it fails too; other documents
given (docs/TRACE.md) are checked for 1 to 3.

Usage: links_test.py UROCE_EXE SOURCE_ROOT [DOC.md ...]
"""
import os
import re
import shlex
import subprocess
import sys

SOURCE_EXT = (".cc", ".h", ".py", ".sh", ".build", ".in")
LINK = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
SECTIONS = ["## RDMA WRITE", "## RDMA READ", "## SEND", "## Atomics", "## Loss recovery", "### RNR NAK",
            "## Congestion control"]


def main():
    uroce, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    docs = sys.argv[3:] or [os.path.join(root, "docs", "PROTOCOL.md")]
    errors = []
    for doc in docs:
        text = open(doc).read()
        base = os.path.dirname(os.path.abspath(doc))
        code_links = test_links = 0
        # Links outside code blocks.
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for label, target in LINK.findall(prose):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = os.path.normpath(os.path.join(base, target.split("#")[0]))
            if not os.path.exists(path):
                errors.append("%s: link to a missing file: %s" % (os.path.basename(doc), target))
                continue
            if not path.endswith(SOURCE_EXT):
                continue
            symbols = re.findall(r"`([^`]+)`", label)
            if not symbols:
                errors.append("%s: link to %s names no symbol (write [`function`](%s))" % (os.path.basename(doc), target, target))
                continue
            body = open(path, errors="replace").read()
            for sym in symbols:
                if sym == os.path.basename(path):
                    continue
                if not re.search(r"(?<![A-Za-z0-9_])" + re.escape(sym) + r"(?![A-Za-z0-9_])", body):
                    errors.append("%s: `%s` does not occur in %s" % (os.path.basename(doc), sym, target))
            if os.path.relpath(path, root).startswith("tests" + os.sep):
                test_links += 1
            else:
                code_links += 1
        # Excerpts of uroce dump output.
        excerpts = 0
        for block in re.findall(r"```\n(.*?)```", text, flags=re.S):
            lines = block.rstrip("\n").split("\n")
            if not lines[0].startswith("$ uroce dump"):
                continue
            excerpts += 1
            args = shlex.split(lines[0][len("$ uroce "):])
            out = subprocess.run([uroce] + args, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True).stdout.split("\n")
            have = set(out)
            for l in lines[1:]:
                if l not in have:
                    errors.append("%s: excerpt line not in `%s` output: %s" % (os.path.basename(doc), lines[0], l[:120]))
        print("%s: %d code links, %d test links, %d excerpts" % (os.path.basename(doc), code_links, test_links, excerpts))
        if os.path.basename(doc) != "PROTOCOL.md":
            continue
        for s in SECTIONS:
            if ("\n" + s) not in text:
                errors.append("%s: section '%s' is missing" % (os.path.basename(doc), s))
        if code_links < 60 or test_links < 30 or excerpts < 8:
            errors.append("%s: too few links or excerpts left (%d code, %d test, %d excerpts)" %
                          (os.path.basename(doc), code_links, test_links, excerpts))
    for e in errors:
        print("FAIL:", e)
    if errors:
        sys.exit("%d broken links or stale excerpts" % len(errors))
    print("ok: every link resolves and every excerpt is current")


if __name__ == "__main__":
    main()
