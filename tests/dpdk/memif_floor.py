#!/usr/bin/env python3
"""uroce-memif-floor: the raw memif floor the stack's performance is compared with.

Two uroce-rawport processes on a memif socket, each pinned to its own core
(EAL -l), no protocol work at all:
  pingpong  the client bounces one --size frame off the server, --iters times;
            we report the median half round trip (ns)
  blast     the client sends --seconds of --size frames one way in bursts of 32;
            we report what the server received per second (Mframes/s)
Each is run --runs times; the table shows the median of the runs.
Usage: memif_floor.py PATH/uroce-rawport [--runs 5] [--iters 200000] [--seconds 3]
       [--size 64] [--cores 0,1] [--json]
"""
import argparse
import json
import os
import statistics
import sys

import harness

EAL = ["--no-huge", "--no-pci", "--no-shconf", "-m", "512", "--log-level=lib.*:error"]


def one(binary, mode, args, cores, tag):
    with harness.tempdir("floor") as d, harness.procs() as started:
        sock = os.path.join(d, "memif.sock")
        srv = harness.Proc(f"{tag}-server", [binary, "-l", cores[0], *EAL, "--", mode, "--role", "server", "--dev",
                                             f"net_memif0,role=server,socket={sock},socket-abstract=no", *args], d)
        started.append(srv)
        harness.wait_for(lambda: os.path.exists(sock) or srv.p.poll() is not None, 15)
        cli = harness.Proc(f"{tag}-client", [binary, "-l", cores[1], *EAL, "--", mode, "--role", "client", "--dev",
                                             f"net_memif0,role=client,socket={sock},socket-abstract=no", *args], d)
        started.append(cli)
        rc_c = cli.wait(120)
        rc_s = srv.wait(30)
        if rc_c != 0 or rc_s != 0:
            print(srv.output(), cli.output())
            raise SystemExit(f"{tag}: server rc={rc_s} client rc={rc_c}")
        return srv.fields(mode + " "), cli.fields(mode + " ")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--runs", type=int, default=5, help="runs per mode (default 5)")
    ap.add_argument("--iters", type=int, default=200000, help="pingpong round trips per run (default 200000)")
    ap.add_argument("--seconds", type=int, default=3, help="blast seconds per run (default 3)")
    ap.add_argument("--size", type=int, default=64, help="frame bytes incl. Ethernet header (default 64)")
    ap.add_argument("--cores", default="0,1", help="server,client cores (default 0,1)")
    ap.add_argument("--json", action="store_true", help="also print the results as JSON")
    a = ap.parse_args()
    cores = a.cores.split(",")
    print(f"config runs={a.runs} iters={a.iters} seconds={a.seconds} size={a.size} cores={a.cores}", flush=True)
    lat, p99, rx, tx = [], [], [], []
    for r in range(a.runs):
        _, c = one(a.binary, "pingpong", ["--iters", str(a.iters), "--size", str(a.size)], cores, f"pp{r}")
        lat.append(float(c["half_rtt_ns_median"]))
        p99.append(float(c["half_rtt_ns_p99"]))
        s, c = one(a.binary, "blast", ["--seconds", str(a.seconds), "--size", str(a.size)], cores, f"bl{r}")
        rx.append(float(s["rx_mpps"]))
        tx.append(float(c["tx_mpps"]))
        print(f"run {r}: half_rtt_median_ns={lat[-1]:.0f} half_rtt_p99_ns={p99[-1]:.0f} "
              f"rx_mpps={rx[-1]:.3f} tx_mpps={tx[-1]:.3f}", flush=True)
    res = {
        "size": a.size, "runs": a.runs,
        "half_rtt_ns_median": statistics.median(lat), "half_rtt_ns_p99_median": statistics.median(p99),
        "rx_mpps_median": statistics.median(rx), "tx_mpps_median": statistics.median(tx),
    }
    print(f"{'metric':<28}{'median of ' + str(a.runs):>16}")
    print(f"{'half round trip (ns)':<28}{res['half_rtt_ns_median']:>16.0f}")
    print(f"{'half round trip p99 (ns)':<28}{res['half_rtt_ns_p99_median']:>16.0f}")
    print(f"{'one-way rx (Mframes/s)':<28}{res['rx_mpps_median']:>16.3f}")
    print(f"{'one-way tx (Mframes/s)':<28}{res['tx_mpps_median']:>16.3f}")
    if a.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
