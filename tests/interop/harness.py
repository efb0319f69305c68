#!/usr/bin/env python3
"""uroce interop harness CLI (docs/INTEROP.md): Linux Soft-RoCE (rdma_rxe) reference peers in
QEMU next to our stack. The parts, one job each:
  guest.py     the guest: namespace, tap, QEMU boot, host commands, testpmd, captures, teardown
  capture.py   pcap analysis: RoCEv2 opcodes, ICRC check, the out-of-band TCP payloads
  cells.py     what the matrices share: the cell runner, step lines, a matrix's CLI and tables
  smoke.py     the smoke checks           pingpong.py  the `uroce pingpong` matrix
  perf.py      the `uroce perf` matrix    verbs.py     stock programs under `uroce run`
  cm.py        the RDMA CM cells (a CLI of its own)
CLI: harness.py {build,boot,pair,smoke,oob-stub,pcap,pingpong,perf,verbs} --help
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_guest  # noqa: E402
import perf  # noqa: E402
import pingpong  # noqa: E402
import verbs  # noqa: E402
from capture import OOB_PORT, oob_messages, pcap_summary  # noqa: E402
from cells import matrix_args, matrix_main  # noqa: E402
from guest import KERNEL_IP4, STACK_IP4, close_sessions, run_pair, run_single  # noqa: E402
from smoke import oob_stub, smoke  # noqa: E402

def _script_arg(v: str | None) -> str | None:
    if v and v.startswith("@"):
        return open(v[1:]).read()
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="uroce interop harness (rxe peers in QEMU)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build/refresh the guest image (idempotent)")
    b.add_argument("--force", action="store_true")
    for name, hlp in (("boot", "one guest on the tap + optional host command/testpmd"),
                      ("pair", "two guests rxe<->rxe")):
        p = sub.add_parser(name, help=hlp)
        p.add_argument("--out", default=f"/tmp/uroce-interop-{name}-{os.getpid()}")
        p.add_argument("--mtu", type=int, default=1500, choices=(1500, 9000))
        p.add_argument("--ipv6", action="store_true", help="give the guest(s) fd00:70::N too")
        p.add_argument("--timeout", type=float, default=300)
        p.add_argument("--nic", default="virtio-net-pci", choices=("virtio-net-pci", "e1000"))
        if name == "boot":
            p.add_argument("--guest", required=True, help="guest sh script (or @file)")
            p.add_argument("--host", help="host command (bash) run in the namespace")
            p.add_argument("--testpmd", action="store_true",
                           help="also run dpdk-testpmd (rxonly, verbose) on the tap")
        else:
            p.add_argument("--server", required=True, help="guest A script (or @file)")
            p.add_argument("--client", required=True, help="guest B script (or @file); "
                           "$PEER = A's IPv4")
    sm = sub.add_parser("smoke", help="the smoke checks (meson suite 'interop')")
    sm.add_argument("--out", default=os.environ.get("UROCE_INTEROP_OUT") or
                    f"/tmp/uroce-interop-smoke-{os.getpid()}")
    sm.add_argument("--only", nargs="*", choices=("a", "b", "c"))
    o = sub.add_parser("oob-stub", help="fake ibv_*_pingpong server (52-byte exchange)")
    o.add_argument("--listen", default=KERNEL_IP4)
    o.add_argument("--port", type=int, default=OOB_PORT)
    o.add_argument("--qpn", type=lambda x: int(x, 0), default=0x000123)
    o.add_argument("--psn", type=lambda x: int(x, 0), default=0x000456)
    o.add_argument("--gid-ip", default=STACK_IP4)
    o.add_argument("--count", type=int, default=1)
    o.add_argument("--timeout", type=float, default=120)
    matrix_args(sub.add_parser("pingpong", help="interop matrix: uroce pingpong <-> stock "
                               "ibv_{rc,uc,ud,srq}_pingpong, both roles (meson suite 'interop')"),
                "pingpong", list(pingpong.PP_TOOLS) + ["rc6"], list(pingpong.PP_TOOLS) + ["rc6"], 900, "rc6 = rc over IPv6 GIDs")
    matrix_args(sub.add_parser("perf", help="interop matrix: uroce perf <-> stock perftest ib_*_{bw,lat}, "
                               "both roles (meson suite 'interop')"),
                "perf", list(perf.PERF_CELLS), perf.PERF_DEFAULT_CELLS, 1500, "default: all cells")
    matrix_args(sub.add_parser("verbs", help="interop matrix: stock verbs/rdma_cm programs under `uroce run` "
                               "<-> the same on rxe, both roles, one boot (meson suite 'interop')"),
                "verbs", list(verbs.VERBS_CELLS), list(verbs.VERBS_CELLS), 1200, "default: all cells")
    pc = sub.add_parser("pcap", help="summarize a pcap: RoCEv2 opcodes, ICRC check")
    pc.add_argument("--oob", action="store_true", help="also print the TCP/18515 payloads")
    pc.add_argument("files", nargs="+")
    a = ap.parse_args(argv)

    if a.cmd == "build":
        r = build_guest.build(build_guest.cache_dir(), force=a.force)
        print(open(r["manifest"]).read(), end="")
        return 0
    if a.cmd == "oob-stub":
        return oob_stub(a.listen, a.port, a.qpn, a.psn, a.gid_ip, a.count, a.timeout)
    if a.cmd == "pcap":
        bad = 0
        for f in a.files:
            s = pcap_summary(f)
            bad += s["icrc_bad"]
            print(f"{f}: {json.dumps(s, default=list)}")
            if a.oob:
                for src, dst, pay in oob_messages(f):
                    txt = pay.decode("ascii", "replace") if all(
                        32 <= c < 127 or c == 0 for c in pay) else "hex:" + pay.hex()
                    print(f"  {src} -> {dst} {len(pay):4d} B  {txt!r}")
        return 1 if bad else 0
    if a.cmd == "smoke":
        return smoke(a.out, a.only)
    if a.cmd == "pingpong":
        return matrix_main(a, "pingpong", pingpong.run_pingpong_matrix, pingpong.pp_table)
    if a.cmd == "perf":
        return matrix_main(a, "perf", perf.run_perf_matrix, perf.perf_table, capture_gb=3)
    if a.cmd == "verbs":
        return matrix_main(a, "verbs", verbs.run_verbs_matrix, verbs.verbs_table, capture_gb=1)
    if os.geteuid() != 0:
        print("interop harness needs root", file=sys.stderr)
        return 2
    if a.cmd == "boot":
        r = run_single(a.out, _script_arg(a.guest), _script_arg(a.host), mtu=a.mtu,
                       ipv6=a.ipv6, testpmd=a.testpmd, timeout=a.timeout, nic=a.nic)
        rc = r["guest"]["rc"]
    else:
        r = run_pair(a.out, _script_arg(a.server), _script_arg(a.client), mtu=a.mtu,
                     ipv6=a.ipv6, timeout=a.timeout, nic=a.nic)
        rc = max((g["rc"] if g["rc"] is not None else 255) for g in r["guests"].values())
    print(json.dumps(r, indent=1, default=list))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        close_sessions()
