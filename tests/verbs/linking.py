"""tests/verbs: a verbs and rdma_cm program linked straight to uroce's
libibverbs.so.1 and librdmacm.so.1 after `meson install`, with nothing but
pkg-config (docs/VERBS.md, "Linking"). Checks:
  * `meson install --destdir STAGE` installs uroce-libibverbs.pc and
    uroce-librdmacm.pc, relocatable, so PKG_CONFIG_PATH finds them in STAGE;
  * a small C program built with `pkg-config --cflags --libs uroce-librdmacm`
    (rdma-core's headers, uroce's libraries) records our <libdir>/uroce as
    its RUNPATH (readelf -d) and binds both libraries there, not /usr/lib's
    (ldd, with no LD_LIBRARY_PATH);
  * run without `uroce run`, with only the UROCE_* variables, it finds the
    device uroce0 and makes an rdma_cm event channel on it.
Usage: linking.py UROCE_BIN LIBIBVERBS_SO BUILD_DIR
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import stock_tools as st  # noqa: E402  (check, sanitizer_env; reads argv[1:3])

BUILD = sys.argv[3]

PROGRAM = r"""
#include <stdio.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

int main(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  if (!list || n != 1) return 1;
  printf("device %s\n", ibv_get_device_name(list[0]));
  ibv_free_device_list(list);
  struct rdma_event_channel* ch = rdma_create_event_channel();
  if (!ch) return 2;
  printf("event channel fd %s\n", ch->fd >= 0 ? "open" : "bad");
  rdma_destroy_event_channel(ch);
  return 0;
}
"""


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)
    if r.returncode:
        sys.exit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def main():
    with tempfile.TemporaryDirectory(prefix="uroce-linking-") as tmp:
        stage = os.path.join(tmp, "stage")
        # Only the verbs libraries and their .pc files (install tag 'verbs'):
        # what the test needs, and all a build that ran only the test suites
        # (the ASan stage) has built.
        run([shutil.which("meson") or sys.exit("meson not on PATH"), "install", "-C", BUILD, "--no-rebuild", "--quiet",
             "--tags", "verbs", "--destdir", stage])
        pcs = glob.glob(os.path.join(stage, "**", "pkgconfig", "uroce-librdmacm.pc"), recursive=True)
        st.check(len(pcs) == 1, f"installed uroce-librdmacm.pc: {pcs}")
        if len(pcs) != 1:
            return 1
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        env["PKG_CONFIG_PATH"] = os.path.dirname(pcs[0])
        ours = os.path.realpath(os.path.join(os.path.dirname(os.path.dirname(pcs[0])), "uroce"))
        flags = run(["pkg-config", "--cflags", "--libs", "uroce-librdmacm"], env=env).split()
        print("pkg-config --cflags --libs uroce-librdmacm:", " ".join(flags))
        src, exe = os.path.join(tmp, "prog.c"), os.path.join(tmp, "prog")
        with open(src, "w") as f:
            f.write(PROGRAM)
        run(["cc", "-Wall", "-Werror", src, "-o", exe] + flags, env=env)

        dyn = run(["readelf", "-d", exe])
        runpath = [line.split("[", 1)[1].rstrip("]") for line in dyn.splitlines() if "(RUNPATH)" in line or "(RPATH)" in line]
        st.check(any(os.path.realpath(p) == ours for r in runpath for p in r.split(":")),
                 f"readelf -d: RUNPATH {runpath} names {ours}")
        bound = {}
        for line in run(["ldd", exe], env=env).splitlines():
            f = line.split()
            if len(f) >= 3 and f[1] == "=>":
                bound[f[0]] = os.path.realpath(f[2])
        for lib in ("libibverbs.so.1", "librdmacm.so.1"):
            st.check(os.path.dirname(bound.get(lib, "")) == ours, f"ldd: {lib} => {bound.get(lib)}")

        # Run with the library's own variables only, as `uroce run` would set them.
        env.update(UROCE_DEV="net_null0", UROCE_IP="10.78.0.1")
        r = subprocess.run(st.sanitizer_env(st.OURS, leaks=False) + [exe], env=env, capture_output=True, text=True,
                           timeout=60)
        st.check(r.returncode == 0 and "device uroce0" in r.stdout and "event channel fd open" in r.stdout,
                 f"the program runs on uroce0 without uroce run: rc {r.returncode}, {r.stdout.strip()!r}"
                 + ("" if r.returncode == 0 else f"\n{r.stderr[-1500:]}"))
    print(f"{len(st.failures)} failed" if st.failures else "all passed")
    return 1 if st.failures else 0


if __name__ == "__main__":
    sys.exit(main())
