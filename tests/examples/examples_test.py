#!/usr/bin/env python3
"""What a new user does with the examples, in a scratch prefix.

1. `meson install --destdir STAGE` from the build directory (the README's
   "Embedding" steps, staged instead of /usr/local);
2. copies examples/ out of the tree and builds each example with its
   Makefile, finding uroce only through `pkg-config` and PKG_CONFIG_PATH
   (uroce.pc is relocatable, so the staged copy resolves to STAGE);
   (step 2 first checks that every installed header compiles on its own);
3. runs each one as its README says, a server and a client process on a
   net_memif link, and checks their output and exit codes.

Usage: examples_test.py BUILD_DIR SOURCE_DIR
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

EAL = ["--no-huge", "--no-pci", "--no-shconf", "-m", "256", "--log-level=pmd.net.memif:critical"]

# Each example: extra client args, client EAL lcores, and the lines both sides must print.
CASES = {
    "rdma_write": {
        "client_args": ["--bytes", "65536"],
        "server_expect": [r"server: 65536 bytes written by the peer, verified"],
        "client_expect": [r"client: RDMA WRITE of 65536 bytes: success in [0-9.]+ us"],
    },
    "kv_get": {
        "client_args": ["--threads", "2", "--gets", "20"],
        "client_lcores": 2,
        "server_expect": [r"server: answered 40 RDMA READ requests"],
        # Thread t GETs keys t, t+2, ..., t+38; slot s holds key s + 1024 * (s % 3), so a key below 1024
        # hits when it is a multiple of 3: 7 of thread 0's even keys (0, 6, ..., 36), 7 of thread 1's (3, ..., 39).
        "client_expect": [r"client: thread 0: 20/20 GETs verified \(7 hits, 13 misses\)",
                          r"client: thread 1: 20/20 GETs verified \(7 hits, 13 misses\)",
                          r"client: 40/40 GETs verified, [0-9]+ GET/s; engine: 40 posts from channels, 40 completions to them"],
    },
    "l2fwd_roce": {
        "client_args": ["--frames", "500", "--writes", "50"],
        "server_expect": [r"server: reflected 500 frames of the application; uroce: 200 RDMA WRITE packets received, [1-9][0-9]* ACKs sent"],
        "client_expect": [r"client: 500/500 own frames came back through rx_non_roce\(\); 50/50 RDMA WRITEs completed, 0 failed"],
    },
}


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        sys.exit("FAILED (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout))
    return r.stdout


def lcore_list(n):
    """n EAL lcores on the CPUs this process may use (0@cpu,1@cpu,...)."""
    cpus = sorted(os.sched_getaffinity(0))
    return ",".join("%d@%d" % (i, cpus[(len(cpus) - 1 - i) % len(cpus)]) for i in range(n))


def main():
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    meson = shutil.which("meson") or sys.exit("meson not on PATH")
    tmp = tempfile.mkdtemp(prefix="uroce-examples-")
    try:
        stage = os.path.join(tmp, "stage")
        run([meson, "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", stage])
        pcs = glob.glob(os.path.join(stage, "**", "pkgconfig", "uroce.pc"), recursive=True)
        if len(pcs) != 1:
            sys.exit("expected one installed uroce.pc, found %s" % pcs)
        pcdir = os.path.dirname(pcs[0])
        libdir = os.path.dirname(pcdir)
        env = dict(os.environ, PKG_CONFIG_PATH=pcdir, LD_LIBRARY_PATH=libdir)
        # The install is complete: headers, version, library, the uroce tool.
        version = run(["pkg-config", "--modversion", "uroce"], env=env).strip()
        cflags = run(["pkg-config", "--cflags", "uroce"], env=env)
        inc = [f for f in cflags.split() if f.startswith("-I") and os.path.isfile(os.path.join(f[2:], "uroce", "verbs.h"))]
        if not inc:
            sys.exit("pkg-config --cflags uroce names no directory with uroce/verbs.h: %s" % cflags)
        vh = open(os.path.join(inc[0][2:], "uroce", "version.h")).read()
        major, minor, patch = (re.search(r"#define UROCE_VERSION_%s (\d+)" % k, vh).group(1) for k in ("MAJOR", "MINOR", "PATCH"))
        if "%s.%s.%s" % (major, minor, patch) != version:
            sys.exit("uroce/version.h says %s.%s.%s, uroce.pc %s" % (major, minor, patch, version))
        print("installed uroce %s into %s" % (version, stage))
        # Every installed header compiles on its own with only pkg-config's flags (STYLE 19).
        headers = sorted(os.path.relpath(os.path.join(d, f), inc[0][2:])
                         for d, _, fs in os.walk(os.path.join(inc[0][2:], "uroce")) for f in fs if f.endswith(".h"))
        public = sorted("uroce/" + f for f in os.listdir(os.path.join(source, "include", "uroce")) if f.endswith(".h"))
        missing = [h for h in public if h not in headers]
        if missing:
            sys.exit("public headers not installed (add them to include/uroce/meson.build): %s" % missing)
        for h in headers:
            r = subprocess.run(["g++"] + cflags.split() + ["-Wall", "-Wextra", "-Wno-volatile", "-Werror", "-fsyntax-only",
                                                           "-x", "c++", "-"], input="#include <%s>\n" % h, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
            if r.returncode != 0:
                sys.exit("installed header <%s> does not compile alone:\n%s" % (h, r.stdout))
        print("%d installed headers compile alone" % len(headers))

        examples = os.path.join(tmp, "examples")
        # A fresh copy without build outputs, so every example is compiled here.
        shutil.copytree(os.path.join(source, "examples"), examples, ignore=shutil.ignore_patterns("build"))
        for name, case in CASES.items():
            d = os.path.join(examples, name)
            run(["make", "-C", d], env=env)
            exe = os.path.join(d, "build", name)
            sock = os.path.join(tmp, name + ".sock")
            server_cmd = [exe] + EAL + ["--lcores", lcore_list(1), "--", "--role", "server", "--socket", sock]
            client_cmd = [exe] + EAL + ["--lcores", lcore_list(case.get("client_lcores", 1)), "--",
                                        "--role", "client", "--socket", sock] + case["client_args"]
            server = subprocess.Popen(server_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
            try:
                client = subprocess.run(client_cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=env, timeout=90)
                s_out, _ = server.communicate(timeout=30)
            finally:
                if server.poll() is None:
                    server.kill()
                    server.wait()
            print("== %s server\n%s== %s client\n%s" % (name, s_out, name, client.stdout))
            if server.returncode != 0 or client.returncode != 0:
                sys.exit("%s: server exit %d, client exit %d" % (name, server.returncode, client.returncode))
            for side, out, pats in (("server", s_out, case["server_expect"]), ("client", client.stdout, case["client_expect"])):
                for p in pats:
                    if not re.search(p, out):
                        sys.exit("%s %s: no line matching %r" % (name, side, p))
        print("all examples built against the staged install and ran")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
