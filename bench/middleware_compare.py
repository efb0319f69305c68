#!/usr/bin/env python3
"""bench/middleware_compare.py: libfabric and qperf over uroce against the
same tools over kernel TCP on this host (docs/MIDDLEWARE.md, "Compared with
kernel TCP"). Kinds:
  pingpong uroce  fi_pingpong -p "verbs;ofi_rxm" -e rdm, both ends under
                  `uroce run` in two processes on a net_memif link;
  pingpong tcp    fi_pingpong -p "tcp;ofi_rxm" -e rdm (libfabric's kernel-TCP
                  provider) on 127.0.0.1 (FI_TCP_IFACE=lo);
  qperf uroce     qperf -cm1 rc_lat rc_bw under `uroce run`, each end on its end
                  of a veth pair (net_af_packet) in a network namespace whose
                  loopback holds the server's uroce address, as
                  tests/middleware/libfabric_qperf.py runs it;
  qperf tcp       qperf tcp_lat tcp_bw on 127.0.0.1.
fi_pingpong gives usec/xfer (half a round trip) and MB/sec (both directions)
at each size, qperf its latency (half a round trip) and bandwidth. Each round
runs every kind once, in that order, so the kinds are interleaved; the table
gives the median of the rounds and their range. Needs root (the namespace),
libfabric-bin and qperf. Exit 0 when every run gave its figures.
With --json FILE the fi_pingpong medians go to FILE as bench/middleware_plot.py
reads them (charts).
Usage: bench/middleware_compare.py [--uroce build/apps/uroce] [--rounds 3]
       [--sizes 64,4096,65536,1048576] [--seconds 2] [--json FILE]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "dpdk"))
import harness  # noqa: E402  (netns, VethPair, Proc: everything stopped by PID, removed on exit)

SERVER, CLIENT = ("10.77.0.1", "02:00:00:77:00:01"), ("10.77.0.2", "02:00:00:77:00:02")
AF_PACKET_EAL = ["--no-huge", "--no-pci", "--no-shconf", "-m", "256", "--log-level=lib.*:error"]
PORT = 25500 + os.getpid() % 500


def iterations(size):
    """About the same bytes per run at each size, and at least 200 round trips."""
    return max(200, min(5000, (64 << 20) // (size * 64)))


def pingpong(kind, size, uroce, d):
    """One fi_pingpong pair at one size: (usec/xfer, MB/sec) of the client's line."""
    argv = ["fi_pingpong", "-e", "rdm", "-S", str(size), "-I", str(iterations(size))]
    if kind == "uroce":
        sock = os.path.join(d, f"pp-{size}.sock")
        end = lambda role, ip_mac: [uroce, "run", "--dev", f"net_memif0,role={role},socket={sock},socket-abstract=no",
                                    "--ip", ip_mac[0], "--mac", ip_mac[1]]
        srv, cli, env = end("server", SERVER), end("client", CLIENT), None
        argv[1:1] = ["-p", "verbs;ofi_rxm"]
    else:
        srv, cli, env = [], [], dict(os.environ, FI_TCP_IFACE="lo")
        argv[1:1] = ["-p", "tcp;ofi_rxm"]
    s = subprocess.Popen(srv + argv + ["-B", str(PORT)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        time.sleep(1.0)
        out = subprocess.run(cli + argv + ["-P", str(PORT), "127.0.0.1"], capture_output=True, text=True, env=env,
                             timeout=300).stdout
    finally:
        try:
            s.wait(timeout=30)
        except subprocess.TimeoutExpired:
            s.kill()
            s.wait()
    # bytes #sent =#ack total time MB/sec usec/xfer Mxfers/sec (counts as 5k, sizes as 4k).
    m = re.search(r"^\S+\s+\S+\s+=\S+\s+\S+\s+[\d.]+s\s+([\d.]+)\s+([\d.]+)", out, re.M)
    return (float(m.group(2)), float(m.group(1))) if m else None


def qperf_figures(out):
    """{test: value} in us and MB/s from qperf's output."""
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6, "KB/sec": 1e-3, "MB/sec": 1.0, "GB/sec": 1e3}
    return {t: float(v) * scale[u] for t, v, u in re.findall(r"^(\w+):\n\s+\w+\s+=\s+([\d.]+) (\S+)", out, re.M)}


def median_range(xs):
    return f"{statistics.median(xs):.4g} ({min(xs):.4g}-{max(xs):.4g})" if xs else "none"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("Usage:")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--uroce", default="build/apps/uroce", help="the uroce executable (default build/apps/uroce)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--sizes", default="64,4096,65536,1048576", help="fi_pingpong sizes in bytes (default 64,4096,65536,1048576)")
    ap.add_argument("--seconds", type=int, default=2, help="qperf's -t per test (default 2)")
    ap.add_argument("--json", default="", help="write the fi_pingpong medians for bench/middleware_plot.py")
    a = ap.parse_args()
    try:
        sizes = [int(x) for x in a.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes: a comma-separated list of byte counts, not {a.sizes!r}")
    if a.rounds < 1 or a.seconds < 1 or any(s < 1 for s in sizes):
        ap.error("--rounds, --seconds and each size must be positive")
    if not os.access(a.uroce, os.X_OK):
        ap.error(f"--uroce {a.uroce}: not an executable (build it: ninja -C build)")
    harness.need_root("the qperf kinds' network namespace")
    res = {}  # (kind, what) -> [values]
    with harness.netns("mw-bench") as ns, harness.tempdir("mw-bench") as d, harness.procs() as started:
        harness.VethPair(ns)
        for dev in ("va", "vb"):
            harness.sh("ip", "link", "set", dev, "arp", "off", ns=ns)
        harness.sh("ip", "addr", "add", SERVER[0] + "/32", "dev", "lo", ns=ns)
        afp = lambda iface, ip_mac: [a.uroce, "run"] + AF_PACKET_EAL + [f"--vdev=net_af_packet0,iface={iface}", "--", "--dev",
                                                                        "net_af_packet0", "--ip", ip_mac[0], "--mac", ip_mac[1]]
        started.append(harness.Proc("qperf-uroce-server", afp("va", SERVER) + ["qperf", "-lp", str(PORT + 1)], d, ns=ns))
        started.append(harness.Proc("qperf-tcp-server", ["qperf", "-lp", str(PORT + 2)], d))
        time.sleep(1.5)
        for r in range(a.rounds):
            for kind in ("uroce", "tcp"):
                for size in sizes:
                    got = pingpong(kind, size, a.uroce, d)
                    print(f"round {r + 1} pingpong {kind} {size} B: {got}", flush=True)
                    if got:
                        res.setdefault((f"pingpong {kind}", f"{size} B usec/xfer"), []).append(got[0])
                        res.setdefault((f"pingpong {kind}", f"{size} B MB/sec"), []).append(got[1])
            for kind, tests, client in (
                    ("uroce", ["rc_lat", "rc_bw"], afp("vb", CLIENT) + ["qperf", SERVER[0], "-lp", str(PORT + 1), "-cm1"]),
                    ("tcp", ["tcp_lat", "tcp_bw"], ["qperf", "127.0.0.1", "-lp", str(PORT + 2)])):
                argv = (["ip", "netns", "exec", ns] if kind == "uroce" else []) + client + ["-t", str(a.seconds)] + tests
                fig = qperf_figures(subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout)
                print(f"round {r + 1} qperf {kind}: {fig}", flush=True)
                for t, v in fig.items():
                    res.setdefault((f"qperf {kind}", t), []).append(v)
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                if line.startswith("Model name")), "unknown CPU")
    print(f"\n{cpu}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; medians of {a.rounds} "
          f"interleaved rounds (min-max)\n")
    print("| size | fi_pingpong uroce usec/xfer | tcp usec/xfer | uroce MB/s | tcp MB/s |\n|---|---|---|---|---|")
    for size in sizes:
        col = lambda k, w: median_range(res.get((f"pingpong {k}", f"{size} B {w}"), []))
        print(f"| {size} | {col('uroce', 'usec/xfer')} | {col('tcp', 'usec/xfer')} | {col('uroce', 'MB/sec')} | {col('tcp', 'MB/sec')} |")
    print("\n| qperf | uroce (rc_*, -cm1) | kernel TCP (tcp_*) |\n|---|---|---|")
    for what, u, t in (("latency, us", "rc_lat", "tcp_lat"), ("bandwidth, MB/s", "rc_bw", "tcp_bw")):
        print(f"| {what} | {median_range(res.get(('qperf uroce', u), []))} | {median_range(res.get(('qperf tcp', t), []))} |")
    if a.json:
        med = {f"libfabric.{k}.{m}": {str(s): statistics.median(res[(f"pingpong {k}", f"{s} B {w}")]) for s in sizes
                                       if res.get((f"pingpong {k}", f"{s} B {w}"))}
               for k in ("uroce", "tcp") for m, w in (("lat", "usec/xfer"), ("bw", "MB/sec"))}
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu, "rounds": a.rounds, "sizes": sizes, "median": med}, f, indent=1)
    want = a.rounds * (4 * len(sizes) + 4)
    got = sum(len(v) for v in res.values())
    print(f"\n{got} of {want} figures")
    return 0 if got == want else 1


if __name__ == "__main__":
    sys.exit(main())
