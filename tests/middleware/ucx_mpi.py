"""tests/middleware: UCX 1.13 (ucx_info, ucx_perftest) and Open MPI 4.1
(mpirun, pml ucx), the Debian binaries unmodified, on uroce's
libibverbs.so.1 under `uroce run --device-files` (docs/MIDDLEWARE.md).
Each pair's ends are the two sides of a net_memif link, each in its own
process through tests/middleware/uroce_end.sh (end 0 the memif server,
end 1 the client); ucx_perftest's and mpirun's out-of-band TCP runs on the
host's loopback. Checks:
  * ucx_info -d lists memory domain uroce0 with rc_verbs and ud_verbs on
    uroce0:1 and picks GID index 3 (RoCEv2, IPv4); without --device-files
    it lists no uroce0 (the reason for the option); the host's /dev and
    /sys/class are unchanged after it; as a user other than root the option
    fails with an error saying so;
  * ucx_perftest over rc_verbs (ud_verbs as UCP's auxiliary wire-up
    transport, self) and over ud_verbs: tag_lat, tag_bw, put_lat/put_bw
    (UCT rc_verbs; UCP's over ud_verbs), am_lat (UCT) end with their final
    figures on both sides, rc 0, no UCX error; both ends' uroce counters
    show the traffic, with RC ACKs only where rc_verbs carries it;
  * tshark decodes a short tag_lat run's frames as InfiniBand over UDP, RC
    opcodes over rc_verbs and UD ones only over ud_verbs;
  * tests/middleware/mpi_pingpong.c (built here with mpicc) under mpirun,
    pml ucx with UCX_TLS rc_verbs and then ud_verbs (no shared memory),
    each rank on its uroce port, and then pml ob1 with btl tcp: every
    message's bytes checked, MPI_Allreduce exact, rc 0; under UCX both
    ranks' counters carry at least every byte the program sent;
  * a side killed with SIGKILL by its PID mid-run (the ucx_perftest server
    during tag_bw over rc_verbs; rank 1 of mpirun during the stream) leaves
    the other with an error exit, not a hang, within the timeout, no process
    of the job left and no socket (memif's) still bound in its folder.
With --compare ROUNDS: no checks; ucx_perftest tag_lat/tag_bw over rc_verbs
on uroce against UCX_TLS=tcp on loopback, and the MPI
program on pml ucx/uroce against pml ob1/btl tcp, sizes 64, 4096, 65536,
1048576, ROUNDS interleaved rounds, medians printed as a markdown table with
the CPU (docs/MIDDLEWARE.md).
Needs root (mount namespaces): exit 77 without it, or without ucx_perftest,
mpirun or mpicc.
Usage: ucx_mpi.py UROCE_BIN [--compare ROUNDS [JSON]]  (JSON: the medians for bench/middleware_plot.py)
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "dpdk"))
import harness  # noqa: E402
import mpi_program  # noqa: E402
from mpi_program import min_frames, pingpong_lines, run_ok  # noqa: E402

UROCE = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
END = os.path.join(HERE, "uroce_end.sh")
failures = []

SIZES = [64, 4096, 65536, 1048576]
RC_TLS = "rc_verbs,ud_verbs:aux,self"  # UCP wires rc_verbs up over a UD endpoint ("aux")
UD_TLS = "ud_verbs,self"
# UCX_UD_VERBS_ETH_DGID_CHECK=n: UCX 1.13 reads a UD receive's L3 header
# type from wc.sl as mlx5 encodes it (ud_iface.h, uct_ud_iface_check_grh)
# and drops every RoCEv2/IPv4 datagram of a provider that does not
# (docs/MIDDLEWARE.md). UROCE_PROGRESS=inline: UCX's async thread polls the
# UD CQ, which would give each process an engine thread of its own.
UCX_ENV = ["UCX_NET_DEVICES=uroce0:1", "UCX_UD_VERBS_ETH_DGID_CHECK=n", "UROCE_PROGRESS=inline"]
# A cell of ucx_perftest or MPI takes a few seconds: one still running after
# HANG_S is hung, and is stopped with its stacks printed while meson's 300 s
# for the whole test leave time to say so.
HANG_S = 60
PERF_PORT = 20000 + os.getpid() % 10000  # ucx_perftest's TCP port; the pairs run one at a time
FINAL = re.compile(r"^Final:\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", re.M)


def check(ok, what):
    harness.check(ok, what, failures)


def counters(path):
    """uroce's --counters file: name -> value (only the counters not zero)."""
    try:
        with open(path) as f:
            return {k: int(v) for k, v in (line.split() for line in f if line.strip())}
    except OSError:
        return {}


def end(n, cd, argv, env=()):
    """argv as end n of a pair, on its uroce port (uroce_end.sh)."""
    return ["env", f"UROCE_END={n}"] + list(env) + [END, UROCE, cd] + argv


# ucx_perftest's stdout is a file here: line-buffered, so that the server's
# "Waiting for connection" and the client's progress lines show as they come.
PERFTEST = ["stdbuf", "-oL", "ucx_perftest"]


def wait_output(proc, pattern, timeout):
    return harness.wait_for(lambda: re.search(pattern, proc.output()) or proc.p.poll() is not None, timeout) \
        and re.search(pattern, proc.output()) is not None


def no_job_left(cd, what):
    """No process of the job in cell folder cd is left (each has the folder
    in its environment: UROCE_COUNTERS, or mpirun's), and no socket is still
    bound under it (the memif socket: /proc/net/unix lists a path while a
    process holds it)."""
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if cd.encode() in f.read():
                    left.append(int(pid))
        except OSError:
            pass
    with open("/proc/net/unix") as f:
        bound = [line.split()[-1] for line in f if cd in line]
    check(not left and not bound, f"{what}: no process of the job left ({left}), no socket bound under its folder ({bound})")


# ---------------------------------------------------------------- ucx_info


def ucx_info():
    base = [UROCE, "run"]
    port = ["--dev", "net_null0", "--ip", "10.77.0.1", "env", "UCX_LOG_LEVEL=debug", "ucx_info", "-d"]
    before = (os.path.exists("/dev/infiniband"), os.path.exists("/sys/class/infiniband"))
    out = subprocess.run(base + ["--device-files"] + port, capture_output=True, text=True, timeout=120).stdout
    domain = out.split("# Memory domain: uroce0", 1)[1].split("# Memory domain:", 1)[0] if "# Memory domain: uroce0" in out else ""
    tls = re.findall(r"#\s+Transport: (\w+)\n#\s+Device: uroce0:1", domain)
    check("rc_verbs" in tls and "ud_verbs" in tls, f"ucx_info -d: memory domain uroce0 with transports {tls} on uroce0:1")
    check("uroce0:1 using gid_index 3" in out, "ucx_info: UCX picks GID index 3 (RoCEv2, ::ffff:10.77.0.1)")
    out = subprocess.run(base + port, capture_output=True, text=True, timeout=120).stdout
    check("uroce0" not in out, "ucx_info -d without --device-files lists no uroce0 (UCX wants /dev/infiniband/uverbs0)")
    after = (os.path.exists("/dev/infiniband"), os.path.exists("/sys/class/infiniband"))
    check(before == after, f"the host's /dev/infiniband and /sys/class/infiniband as they were ({after})")
    nobody = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + base + ["--device-files"]
                            + port, capture_output=True, text=True, timeout=60)
    check(nobody.returncode == 1 and "root is needed" in nobody.stderr,
          f"uroce run --device-files as nobody: rc {nobody.returncode}, '{nobody.stderr.strip()[:120]}'")


# ---------------------------------------------------------------- ucx_perftest

# (cell, UCX_TLS, the batch: one line a test, "label ucx_perftest-args", the
# UCT tests naming the device and transport)
PERF_CELLS = [
    ("perftest_rc", RC_TLS, [
        "tag_lat -t tag_lat -s 64 -n 1000",
        "tag_bw -t tag_bw -s 65536 -n 200",
        "put_lat -t put_lat -d uroce0:1 -x rc_verbs -s 64 -n 1000",
        "put_bw -t put_bw -d uroce0:1 -x rc_verbs -D zcopy -s 65536 -n 200",
        "am_lat -t am_lat -d uroce0:1 -x rc_verbs -s 8 -n 1000",
    ]),
    ("perftest_ud", UD_TLS, [
        "tag_lat -t tag_lat -s 64 -n 1000",
        "tag_bw -t tag_bw -s 65536 -n 200",
        "ucp_put_lat -t ucp_put_lat -s 64 -n 1000",
        "ucp_put_bw -t ucp_put_bw -s 65536 -n 200",
        "am_lat -t am_lat -d uroce0:1 -x ud_verbs -s 8 -n 1000",
    ]),
]


class PerftestPair:
    """ucx_perftest's server (end 0) and client (end 1) of cell `name` on a
    batch file, which both must read; over uroce (each end through
    uroce_end.sh, UCX_ENV and UCX_TLS=tls) or, with tls None, over UCX's tcp
    transport on loopback (no uroce)."""

    def __init__(self, d, name, tls, lines, env=(), client_env=()):
        self.name, self.client_env = name, list(client_env)
        self.cd = os.path.join(d, name)
        os.mkdir(self.cd)
        batch = os.path.join(self.cd, "batch")
        with open(batch, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.args = ["-p", str(PERF_PORT), "-b", batch]
        self.env = (UCX_ENV + [f"UCX_TLS={tls}"] if tls else ["UCX_TLS=tcp,self", "UCX_NET_DEVICES=lo"]) + list(env)
        self.on_uroce = tls is not None

    def start(self, n):
        """End n: the server, which returns once it listens, or the client."""
        argv = PERFTEST + (["127.0.0.1"] if n else []) + self.args
        env = self.env + (self.client_env if n else [])
        argv = end(n, self.cd, argv, env) if self.on_uroce else ["env"] + env + argv
        p = harness.Proc(f"{self.name}-{'client' if n else 'server'}", argv, self.cd)
        if n == 0:
            wait_output(p, r"Waiting for connection", 60)
        return p

    def run(self):
        """Both ends to the end: (client rc, server rc, client output, server
        output, counters of end 0 and end 1)."""
        srv = self.start(0)
        try:
            cli = self.start(1)
            rc_c = cli.wait(HANG_S, stacks=True)
            if rc_c is None:
                srv.print_stacks()
            rc_s = srv.wait(30, stacks=rc_c is not None)  # a hung client's server: its stacks are above
        finally:
            srv.stop()
        return rc_c, rc_s, cli.output(), srv.output(), counters(os.path.join(self.cd, "end0.counters")), \
            counters(os.path.join(self.cd, "end1.counters"))


def perftest_pair(d, name, tls, lines, env=(), client_env=()):
    return PerftestPair(d, name, tls, lines, env, client_env).run()


def perftest(d):
    for name, tls, lines in PERF_CELLS:
        t0 = time.monotonic()
        rc_c, rc_s, oc, os_, c0, c1 = perftest_pair(d, name, tls, lines)
        finals = FINAL.findall(oc)
        errors = [line for line in (oc + os_).splitlines() if " ERROR " in line or "Fatal" in line]
        check(rc_c == 0 and rc_s == 0 and len(finals) == len(lines) and not errors,
              f"{name}: client rc {rc_c}, server rc {rc_s}, {len(finals)} of {len(lines)} tests ended with their "
              f"figures, {len(errors)} UCX errors ({time.monotonic() - t0:.1f} s)")
        for line, f in zip(lines, finals):
            print(f"    {line.split()[0]:<12} -s {line.split('-s ')[1].split()[0]:>6}: {f[0]} iterations, "
                  f"median {f[1]} us, {f[4]} MB/s, {f[5]} msg/s")
        if errors or rc_c != 0 or rc_s != 0:
            print(oc[-2000:], "\n---\n", os_[-2000:])
        # Each test moves its iterations over uroce in both directions.
        check(min(c0.get("sent_pkts", 0), c1.get("sent_pkts", 0), c0.get("rcvd_pkts", 0), c1.get("rcvd_pkts", 0)) > 3000,
              f"{name}: uroce counters, end 0 sent {c0.get('sent_pkts')} received {c0.get('rcvd_pkts')}, "
              f"end 1 sent {c1.get('sent_pkts')} received {c1.get('rcvd_pkts')}")
        rc_acks = c0.get("ack_sent", 0) > 0 and c1.get("ack_sent", 0) > 0
        check(rc_acks if tls == RC_TLS else "ack_sent" not in c0 and "ack_sent" not in c1,
              f"{name}: RC ACKs sent: end 0 {c0.get('ack_sent', 0)}, end 1 {c1.get('ack_sent', 0)} "
              f"({'rc_verbs carries the data' if tls == RC_TLS else 'none: ud_verbs alone'})")


def wire(d):
    """A short tag_lat over each transport with the client's frames captured:
    tshark must decode every RoCE frame as InfiniBand with a BTH, nothing
    malformed; over rc_verbs the 400 messages go in RC SEND frames (BTH
    opcodes below 0x20), over ud_verbs in UD SEND frames (0x64, 0x65) and
    no RC frame at all."""
    for name, tls in (("wire_rc", RC_TLS), ("wire_ud", UD_TLS)):
        pcap = os.path.join(d, name + ".pcap")
        rc_c, rc_s, *_ = perftest_pair(d, name, tls, ["tag_lat -t tag_lat -s 64 -n 200 -w 10"],
                                      client_env=[f"UROCE_PCAP={pcap}"])
        tshark = ["tshark", "-r", pcap, "-d", "udp.port==4791,infiniband"]
        rows = subprocess.run(tshark + ["-T", "fields", "-e", "frame.protocols", "-e", "infiniband.bth.opcode"],
                              capture_output=True, text=True, timeout=120).stdout.splitlines()
        ops = [int(r.split("\t")[1]) for r in rows if ":infiniband" in r and len(r.split("\t")) > 1 and r.split("\t")[1]]
        rc_ops = sum(1 for o in ops if o < 0x20)
        ud_ops = sum(1 for o in ops if o in (0x64, 0x65))
        bad = subprocess.run(tshark + ["-Y", "_ws.malformed || _ws.expert.severity >= error"], capture_output=True,
                             text=True, timeout=120).stdout.splitlines()
        want = rc_ops >= 400 if tls == RC_TLS else rc_ops == 0 and ud_ops >= 400
        check(rc_c == 0 and rc_s == 0 and want and not bad and len(ops) == len([r for r in rows if ":udp" in r]),
              f"{name}: rc {rc_c}/{rc_s}; tshark: {len(ops)} InfiniBand frames, {rc_ops} RC, {ud_ops} UD, "
              f"{len(bad)} malformed or in error")


# ---------------------------------------------------------------- Open MPI

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
# pml ucx with the uroce device and no shared memory anywhere: btl self only
# (ob1's transports are not used by pml ucx, but osc and coll must not find
# vader either), UCX_TLS without sm/posix/cma.
MPI_UCX = ["--mca", "pml", "ucx", "--mca", "btl", "self", "--mca", "osc", "ucx"]
MPI_TCP = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo"]


def mpi_ucx_argv(cd, tls, prog):
    env = UCX_ENV + [f"UCX_TLS={tls}"]
    exports = [x for v in env for x in ("-x", v)]
    return MPIRUN + MPI_UCX + exports + [END, UROCE, cd] + prog


def mpi(d, exe):
    iters = 200
    prog = [exe, ",".join(map(str, SIZES)), str(iters)]
    runs = [("mpi_ucx_rc", "ucx", RC_TLS), ("mpi_ucx_ud", "ucx", UD_TLS), ("mpi_tcp", "tcp", None)]
    for name, kind, tls in runs:
        cd = os.path.join(d, name)
        os.mkdir(cd)
        argv = mpi_ucx_argv(cd, tls, prog) if kind == "ucx" else MPIRUN + MPI_TCP + prog
        t0 = time.monotonic()
        p = harness.Proc(name, argv, cd)
        rc = p.wait(HANG_S, stacks=True)
        out = p.output()
        pp = pingpong_lines(out)
        good = rc == 0 and run_ok(out, SIZES)
        check(bool(good), f"{name}: mpirun rc {rc}, {len(pp)} sizes, allreduce checked, data checked "
                          f"({time.monotonic() - t0:.1f} s)")
        for s, (lat, bw, n) in sorted(pp.items()):
            print(f"    {s:>8} B: {n} round trips, half round trip median {lat} us; stream {bw} MB/s")
        if not good:
            print(out[-3000:])
        if kind == "ucx":
            c = [counters(os.path.join(cd, f"end{r}.counters")) for r in (0, 1)]
            sent0, sent1 = min_frames(out)
            check(c[0].get("sent_pkts", 0) >= sent0 and c[1].get("sent_pkts", 0) >= sent1 and sent1 > 0,
                  f"{name}: over uroce: rank 0 sent {c[0].get('sent_pkts')} frames (>= {sent0}), rank 1 "
                  f"{c[1].get('sent_pkts')} (>= {sent1})")
            acks = c[0].get("ack_sent", 0) > 0 and c[1].get("ack_sent", 0) > 0
            check(acks if tls == RC_TLS else "ack_sent" not in c[0] and "ack_sent" not in c[1],
                  f"{name}: RC ACKs sent: rank 0 {c[0].get('ack_sent', 0)}, rank 1 {c[1].get('ack_sent', 0)}")


# ---------------------------------------------------------------- a side killed

def kill_perftest(d):
    """The server is killed while the client streams tag_bw over rc_verbs:
    the client's RC QP runs out of retries (UCX_RC_TIMEOUT 100 ms, 4 retries)
    and ucx_perftest must exit with an error, not hang."""
    name = "kill_perftest"
    pair = PerftestPair(d, name, RC_TLS, ["tag_bw -t tag_bw -s 4096 -n 100000000"],
                        env=["UCX_RC_TIMEOUT=100ms", "UCX_RC_RETRY_COUNT=4"])
    srv = pair.start(0)
    cli = None
    try:
        cli = pair.start(1)
        running = wait_output(cli, r"\[thread 0\]\s+\d+", 60)  # the first progress line: data flows
        os.kill(srv.p.pid, signal.SIGKILL)
        t0 = time.monotonic()
        rc = cli.wait(30)
        took = time.monotonic() - t0
        check(running and rc not in (0, None),
              f"{name}: server killed mid tag_bw, the client exits rc {rc} after {took:.1f} s (30 s allowed)")
        said = [line for line in cli.output().splitlines() if re.search(r"Fatal|ERROR|error", line)]
        print("    client: " + (said[0].strip()[-300:] if said else "(no error line)"))
    finally:
        if cli:
            cli.stop()
        srv.stop()
    no_job_left(pair.cd, name)


def kill_mpi(d, exe):
    """Rank 1 stalls mid-stream and is killed: mpirun must end the job with an
    error exit within the timeout."""
    name = "kill_mpi"
    cd = os.path.join(d, name)
    os.mkdir(cd)
    p = harness.Proc(name, mpi_ucx_argv(cd, RC_TLS, [exe, "65536", "1000", "--stall", "60"]), cd)
    try:
        stalled = wait_output(p, r"rank 1 pid (\d+) stalls", 90)
        pid = int(re.search(r"rank 1 pid (\d+) stalls", p.output()).group(1)) if stalled else None
        if pid:
            os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        rc = p.wait(30)
        took = time.monotonic() - t0
        check(pid is not None and rc not in (0, None),
              f"{name}: rank 1 (pid {pid}) killed mid-stream, mpirun exits rc {rc} after {took:.1f} s (30 s allowed)")
    finally:
        p.stop()
    no_job_left(cd, name)


# ---------------------------------------------------------------- comparison

def compare(d, exe, rounds, json_path):
    """ucx_perftest over rc_verbs on uroce against UCX_TLS=tcp on lo, and the
    MPI program on pml ucx/uroce against ob1/tcp: the rounds interleaved,
    medians printed."""
    lines = [f"tag_lat_{s} -t tag_lat -s {s} -n {1000 if s < 65536 else 200}" for s in SIZES] + \
            [f"tag_bw_{s} -t tag_bw -s {s} -n {2000 if s < 65536 else 200}" for s in SIZES]
    res = {}
    prog = [exe, ",".join(map(str, SIZES)), "500"]
    for r in range(rounds):
        for kind in ("uroce", "tcp"):
            oc = perftest_pair(d, f"cmp_{kind}_{r}", RC_TLS if kind == "uroce" else None, lines)[2]
            for line, f in zip(lines, FINAL.findall(oc)):
                label = line.split()[0]
                res.setdefault(("ucx", kind, label), []).append(float(f[1]) if "lat" in label else float(f[4]))
            mcd = os.path.join(d, f"cmp_mpi_{kind}_{r}")
            os.mkdir(mcd)
            argv = mpi_ucx_argv(mcd, RC_TLS, prog) if kind == "uroce" else MPIRUN + MPI_TCP + prog
            p = harness.Proc(f"mpi-{kind}", argv, mcd)
            p.wait(300)
            for s, (lat, bw, _) in pingpong_lines(p.output()).items():
                res.setdefault(("mpi", kind, f"lat_{s}"), []).append(lat)
                res.setdefault(("mpi", kind, f"bw_{s}"), []).append(bw)
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout
                .splitlines() if line.startswith("Model name")), "?")
    print(f"\nCPU: {cpu}, {os.cpu_count()} CPUs; medians of {rounds} interleaved rounds\n")
    print("| layer | size (B) | latency uroce / tcp (us) | bandwidth uroce / tcp (MB/s) |")
    print("|---|---|---|---|")

    def med(key):
        v = res.get(key, [])
        return f"{statistics.median(v):.2f}" if v else "-"
    for s in SIZES:
        print(f"| ucx_perftest tag | {s} | {med(('ucx', 'uroce', f'tag_lat_{s}'))} / {med(('ucx', 'tcp', f'tag_lat_{s}'))} "
              f"| {med(('ucx', 'uroce', f'tag_bw_{s}'))} / {med(('ucx', 'tcp', f'tag_bw_{s}'))} |")
    for s in SIZES:
        print(f"| MPI pingpong | {s} | {med(('mpi', 'uroce', f'lat_{s}'))} / {med(('mpi', 'tcp', f'lat_{s}'))} "
              f"| {med(('mpi', 'uroce', f'bw_{s}'))} / {med(('mpi', 'tcp', f'bw_{s}'))} |")
    if json_path:  # for bench/middleware_plot.py
        series = {f"{layer}.{kind}.{m}": {str(s): statistics.median(res[(layer, kind, label.format(s))]) for s in SIZES
                                          if res.get((layer, kind, label.format(s)))}
                  for layer, labels in (("ucx", {"lat": "tag_lat_{}", "bw": "tag_bw_{}"}),
                                        ("mpi", {"lat": "lat_{}", "bw": "bw_{}"}))
                  for kind in ("uroce", "tcp") for m, label in labels.items()}
        with open(json_path, "w") as f:
            json.dump({"cpu": cpu, "rounds": rounds, "sizes": SIZES, "median": series}, f, indent=1)


def main():
    harness.need_root("private mount namespaces (uroce run --device-files)")
    for tool in ("ucx_perftest", "ucx_info", "mpirun", "mpicc", "tshark"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} is not installed (ucx-utils, openmpi-bin, libopenmpi-dev, tshark)")
            return harness.SKIP
    rounds = int(sys.argv[3]) if sys.argv[2:3] == ["--compare"] else 0
    json_path = sys.argv[4] if rounds and len(sys.argv) > 4 else ""
    with harness.tempdir("middleware") as d:
        exe = mpi_program.build(os.path.join(d, "mpi_pingpong"))
        if rounds:
            compare(d, exe, rounds, json_path)
            return 0
        ucx_info()
        perftest(d)
        wire(d)
        mpi(d, exe)
        kill_perftest(d)
        kill_mpi(d, exe)
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
