"""Process, temp-dir and network-namespace helpers for the tests/dpdk drivers,
and the one lookup of a sanitizer build's runtimes every test script uses.

Everything a test starts is stopped by its PID, and everything it creates (temp
dirs, namespaces) is removed, whether the test passes or fails. Exit status
follows meson: 0 pass, 1 fail, 77 skip (only for "not root" where root is needed).

Run as a program, `harness.py preload LIB -- COMMAND...` runs COMMAND with
LIB's sanitizer runtimes in LD_PRELOAD (none in a build without sanitizers):
meson's tests that start a program under `uroce run` go through it.
"""
import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77


def need_root(what):
    if os.geteuid() != 0:
        print(f"SKIP: {what} needs root (network namespaces)")
        sys.exit(SKIP)


class Proc:
    """A child process whose output goes to a log file."""

    def __init__(self, name, argv, log_dir, ns=None, env=None):
        self.name = name
        self.log_path = os.path.join(log_dir, name + ".log")
        self.log = open(self.log_path, "w")
        if ns:
            argv = ["ip", "netns", "exec", ns] + argv
        print(f"[{name}] {' '.join(argv)}", flush=True)
        self.p = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def wait(self, timeout, stacks=False):
        """The exit status, or None after stopping a process still running
        after timeout seconds (with stacks, first printing where each of its
        threads is: print_stacks)."""
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"[{self.name}] still running after {timeout} s: stopping pid {self.p.pid}")
            if stacks:
                self.print_stacks()
            self.stop()
            return None

    def print_stacks(self):
        """Every thread's backtrace (gdb) in this process and the processes
        under it (a program under `uroce run`, which runs it as a child): what
        a hang says about where it hung."""
        if not shutil.which("gdb"):
            print(f"[{self.name}] no gdb: no stacks")
            return
        todo, tree = [self.p.pid], []
        while todo:
            pid = todo.pop()
            tree.append(pid)
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except OSError:
                pass
        for pid in tree:
            try:
                gdb = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 30"],
                                     capture_output=True, text=True, timeout=60)
                at = gdb.stdout.find("\nThread ")
                out = gdb.stdout[at:].strip() if at >= 0 else f"(none: {gdb.stderr.strip()[-300:]})"
            except subprocess.TimeoutExpired:
                out = "(none: gdb did not answer in 60 s)"
            print(f"[{self.name}] stacks of pid {pid}:\n{out}", flush=True)

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()  # SIGTERM to this PID only
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()

    def output(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def fields(self, prefix):
        """key=value pairs of the last output line starting with prefix."""
        out = {}
        for line in self.output().splitlines():
            if line.startswith(prefix):
                out = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        return out


def _leave_on_sigterm(signum, _frame):
    """meson test stops a test past its timeout with SIGTERM: leave through the
    finally blocks below, so that namespaces, temp dirs and processes go as on
    any other failure (a test killed outright left its namespace behind)."""
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _leave_on_sigterm)


@contextlib.contextmanager
def tempdir(tag):
    d = tempfile.mkdtemp(prefix=f"uroce-{tag}-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def procs():
    """Collects Procs; stops every one still running on exit."""
    started = []
    try:
        yield started
    finally:
        for p in started:
            p.stop()


def sh(*argv, ns=None, check=True):
    if ns:
        argv = ("ip", "netns", "exec", ns) + argv
    return subprocess.run(argv, check=check, capture_output=True, text=True)


@contextlib.contextmanager
def netns(tag):
    """A fresh network namespace with lo up and IPv6 off (no stray ND/MLD frames)."""
    name = f"uroce-{tag}-{os.getpid()}-{secrets.token_hex(2)}"
    sh("ip", "netns", "add", name)
    try:
        sh("ip", "link", "set", "lo", "up", ns=name)
        sh("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", ns=name)
        sh("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", ns=name)
        yield name
    finally:
        # Kill anything left in it by PID, then delete it (deleting also
        # destroys the veth/tap interfaces inside).
        pids = sh("ip", "netns", "pids", name, check=False).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)
        sh("ip", "netns", "del", name, check=False)
        if name in sh("ip", "netns", "list", check=False).stdout:
            print(f"FAIL: namespace {name} still exists")
            sys.exit(1)


class VethPair:
    """veth va <-> vb inside namespace ns, both up, no addresses (the kernel stays out).

    net_af_packet (22.11) joins each socket to the fanout group
    (getpid() ^ ifindex) & 0xffff, and fanout groups are per namespace: two
    processes with adjacent PIDs on veth ends with adjacent ifindexes can draw
    the same group, and the second probe fails with EINVAL. Indexes whose XOR
    is 0x8000 keep the groups apart for any two PIDs less than 32768 apart."""

    def __init__(self, ns):
        sh("ip", "link", "add", "va", "index", "36864", "type", "veth", "peer", "name", "vb", "index", "4096", ns=ns)
        for i in ("va", "vb"):
            sh("ip", "link", "set", i, "up", ns=ns)


def wait_for(cond, timeout, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return False


def no_eal_leftovers(run_dir, what):
    """(ok, message) for harness.check: EAL made its runtime folder under
    run_dir/dpdk (the RUNTIME_DIRECTORY the test gave `what`), and nothing
    is left there now that `what` is done."""
    dpdk = os.path.join(run_dir, "dpdk")
    if not os.path.isdir(dpdk):
        return False, f"{what}: no {dpdk}: EAL did not make its runtime folder under RUNTIME_DIRECTORY"
    left = sorted(os.listdir(dpdk))
    return not left, f"{what}: EAL runtime folders left in {dpdk}: {left}"


def check(ok, msg, failures):
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        failures.append(msg)


def sanitizer_runtimes(binary):
    """The ASan and UBSan runtimes binary (a program or a shared library) is
    linked with, as the loader resolves them (ldd): empty in a build without
    sanitizers. A program that was not built with them loads a sanitized
    library (uroce's libibverbs.so.1 under `uroce run`) only with these
    preloaded first (LD_PRELOAD)."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    return [f.split()[2] for f in out.splitlines() if re.search(r"lib(asan|ubsan)\.so", f) and "=>" in f]


def _main(argv):
    if len(argv) < 4 or argv[0] != "preload" or argv[2] != "--":
        print("usage: harness.py preload LIB -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    env = dict(os.environ)
    runtimes = sanitizer_runtimes(argv[1])
    if runtimes:
        env["LD_PRELOAD"] = " ".join(runtimes)
    os.execvpe(argv[3], argv[3:], env)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
