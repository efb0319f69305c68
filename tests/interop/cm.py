#!/usr/bin/env python3
"""uroce RDMA CM interop cells: uroce's CM over QP1 against stock librdmacm tools on Linux
rdma_rxe in the QEMU guest of harness.py, both roles (docs/CM.md, docs/INTEROP.md).

One guest boot that runs every cell in turn, our stack as server and then as client (the stock
tool in the guest, `uroce ...` on the host tap through DPDK's net_af_packet). The side that connects retries until the
listener is up (a REJ "invalid service ID", reason 8, until then). Per cell: both tools' exit
codes and output checks, `uroce dump --verify` of our capture, the harness's own ICRC check,
and tshark: every CM MAD must decode as the CM message we expect, with no malformed mark.

CLI: cm.py [--roles server client] [--cells rping] [--out DIR] [--uroce build/apps/uroce]
Needs root and /dev/net/tun (else exit 77 = skipped), like the other interop suites.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from capture import ROCE_PORT  # noqa: E402
from cells import (host_step, matrix_args, matrix_main, matrix_ok, md_table, retry_loop, run_cells,  # noqa: E402
                   verify_text, wait_arp)
from guest import GUEST_IP4, GUEST_IP6, KERNEL_IP4, STACK_IP4, STACK_IP6, STACK_MAC, close_sessions  # noqa: E402

STEP_TIMEOUT = 150        # one stock tool run in the guest
HOST_TIMEOUT = 120        # --timeout of one `uroce` run
CONNECT_S = 60            # how long the active side keeps trying to connect (retry_loop)
EAL = ("--no-huge --no-pci --no-shconf -m 256 -l 0 --log-level=lib.*:error "
       "--vdev=net_af_packet0,iface=$UROCE_TAP")
OURS = f"--ip {STACK_IP4} --mac {STACK_MAC} --timeout {HOST_TIMEOUT}"

# Per cell: the stock tool as server and as client (guest), ours as server and as client (host),
# what each side's output must show, and the CM messages the capture must hold.
#   {peer} = the server's address as the client dials it, {pcap} = our capture.
PINGS = 1000
PINGS6 = 200
MSGS, MSG_BYTES = 100, 512
CELLS = {
    "rping": {
        "stock_server": f"rping -s -a {GUEST_IP4} -v -C {PINGS}",
        "stock_client": f"rping -c -a {STACK_IP4} -v -V -C {PINGS}",
        "our_server": f"rping {OURS} -s -a {STACK_IP4} -v --pcap {{pcap}} --counters",
        "our_client": f"rping {OURS} -c -a {GUEST_IP4} -v -V -C {PINGS} --pcap {{pcap}} --counters",
        # rping prints one line per ping on both sides; the stock server then reports the
        # disconnect on stderr ("wait for RDMA_READ_ADV state 10") and still exits 0.
        "stock_server_ok": rf"server ping data: rdma-ping-{PINGS - 1}: ",
        "stock_client_ok": rf"ping data: rdma-ping-{PINGS - 1}: ",
        "our_ok": rf"ping data: rdma-ping-{PINGS - 1}: ",
        "mads": ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"],
    },
    # rping over IPv6 GIDs: rdma_cm's header carries IPv6 addresses (IP version 6).
    "rping6": {
        "stock_server": f"rping -s -a {GUEST_IP6} -v -C {PINGS6}",
        "stock_client": f"rping -c -a {STACK_IP6} -v -V -C {PINGS6}",
        "our_server": f"rping {OURS} --ip6 {STACK_IP6} -s -a {STACK_IP6} -v --pcap {{pcap}} --counters",
        "our_client": f"rping {OURS} --ip6 {STACK_IP6} -c -a {GUEST_IP6} -v -V -C {PINGS6} --pcap {{pcap}} --counters",
        "stock_server_ok": rf"server ping data: rdma-ping-{PINGS6 - 1}: ",
        "stock_client_ok": rf"ping data: rdma-ping-{PINGS6 - 1}: ",
        "our_ok": rf"ping data: rdma-ping-{PINGS6 - 1}: ",
        "mads": ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"],
    },
    # RC connection, then -C SENDs of -S bytes each way; the server disconnects.
    "ucmatose": {
        "stock_server": f"ucmatose -b {GUEST_IP4} -C {MSGS} -S {MSG_BYTES}",
        "stock_client": f"ucmatose -s {STACK_IP4} -C {MSGS} -S {MSG_BYTES}",
        "our_server": f"ucmatose {OURS} -b {STACK_IP4} -C {MSGS} -S {MSG_BYTES} --pcap {{pcap}} --counters",
        "our_client": f"ucmatose {OURS} -s {GUEST_IP4} -C {MSGS} -S {MSG_BYTES} --pcap {{pcap}} --counters",
        "stock_server_ok": r"data transfers complete\n(.|\n)*disconnected",
        "stock_client_ok": r"data transfers complete",
        "our_ok": r"data transfers complete(.|\n)*test complete",
        "mads": ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"],
    },
    # UD: SIDR REQ / REP, then -C datagrams with immediate data each way.
    "udaddy": {
        "stock_server": f"udaddy -b {GUEST_IP4} -C {MSGS} -S {MSG_BYTES}",
        "stock_client": f"udaddy -s {STACK_IP4} -C {MSGS} -S {MSG_BYTES}",
        "our_server": f"udaddy {OURS} -b {STACK_IP4} -C {MSGS} -S {MSG_BYTES} --pcap {{pcap}} --counters",
        "our_client": f"udaddy {OURS} -s {GUEST_IP4} -C {MSGS} -S {MSG_BYTES} --pcap {{pcap}} --counters",
        "stock_server_ok": r"data transfers complete",
        "stock_client_ok": r"data transfers complete",
        "our_ok": r"data transfers complete(.|\n)*test complete",
        "mads": ["ServiceIDResReq", "ServiceIDResReqResp"],
    },
}
# perftest -R: the out-of-band exchange runs over a first rdma_cm connection (no TCP), the test
# QP is connected by a second one (docs/INTEROP.md, "perftest with -R"). The stock server prints
# the client's result row; both print "Data ex. method : rdma_cm". (The guest's lines carry a
# timestamp in front, hence no ^ before a row.)
for _cell, _tool, _flags, _test, _row in (
        ("write_bw_R", "ib_write_bw", "-s 16384 -n 50", "write_bw", r"\s16384\s+50\s+[\d.]+\s+[\d.]+\s+[\d.]+\s*$"),
        ("send_lat_R", "ib_send_lat", "-s 64 -n 100", "send_lat", r"\s64\s+100(\s+[\d.]+){7}\s*$")):
    _stock = f"{_tool} -d rxe0 -R -F {_flags}"
    _ours = f"perf {_test} {OURS} -R {_flags} --pcap {{pcap}} --counters"
    CELLS[_cell] = {
        "stock_server": _stock,
        "stock_client": f"{_stock} {STACK_IP4}",
        "our_server": f"{_ours} --listen {STACK_IP4}",
        "our_client": f"{_ours} {GUEST_IP4}",
        "stock_server_ok": rf"(?m)Data ex. method : rdma_cm(.|\n)*{_row}",
        "stock_client_ok": rf"(?m)Data ex. method : rdma_cm(.|\n)*{_row}",
        "our_ok": rf"(?m)Data ex. method : rdma_cm(.|\n)*{_row}",
        "mads": ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"],
        # perftest's client gives up at once when its REQ is rejected (our server not up yet)
        "retry_on": "REJECTED\\|UNREACHABLE\\|Unable to perform rdma_client",
    }

# qperf -cm1: qperf's own TCP control connection (port 19765) carries the request, the rdma_cm
# port, the node information, the sync messages and the server's statistics; rc_lat and rc_bw run
# on one rdma_cm RC connection each (docs/CM.md, "qperf -cm1"). The stock client dials one address
# for both, so as a server our stack takes the namespace kernel's address and the tap's MAC (the
# port's own, from net_af_packet): the kernel keeps the TCP, our port takes the RoCE frames. After
# rc_lat and rc_bw the stock client asks for a test we do not implement and must be refused
# (qperf's error report: it prints "server: ..." and exits 1). As a client we end the stock
# server with qperf's quit test.
QPERF_TIME = 2  # seconds per test (qperf -t): the boot runs 2 x 2 s of test per role
QPERF_LAT = r"latency\s+=\s+([\d.,]+) (ns|us|ms|sec)\b"
QPERF_BW = r"\bbw\s+=\s+([\d.,]+) (bytes|KB|MB|GB)/sec\b"
CELLS["qperf"] = {
    "stock_server": "qperf",
    "stock_client": (f'sh -c "qperf -cm1 -t {QPERF_TIME} {KERNEL_IP4} rc_lat rc_bw && '
                     f'{{ qperf -cm1 {KERNEL_IP4} rc_rdma_read_bw; [ \\$? = 1 ]; }}"'),
    "our_server": (f"qperf --ip {KERNEL_IP4} --listen {KERNEL_IP4} -C 3 --timeout {HOST_TIMEOUT} "
                   f"--pcap {{pcap}} --counters"),
    "our_client": f"qperf {OURS} -t {QPERF_TIME} {GUEST_IP4} rc_lat rc_bw quit --pcap {{pcap}} --counters",
    # the stock server prints nothing unless a test fails
    "stock_server_ok": r"\A(?!(.|\n)*(failed|error|unexpected))",
    "stock_client_ok": rf"rc_lat:(.|\n)*{QPERF_LAT}(.|\n)*rc_bw:(.|\n)*{QPERF_BW}(.|\n)*rc_rdma_read_bw:(.|\n)*server: ",
    "our_server_ok": (r"# served rc_lat: received [1-9]\d* msgs(.|\n)*# served rc_bw: received [1-9]\d* msgs"
                      r"(.|\n)*# refused rc_rdma_read_bw: "),
    "our_client_ok": rf"rc_lat:\n\s+{QPERF_LAT}(.|\n)*rc_bw:\n\s+{QPERF_BW}(.|\n)*quit:",
    "mads": ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"],
    "retry_on": "failed to connect",
    "figures": True,
    # The namespace kernel owns our address here and has no socket on UDP 4791, so it would answer
    # every RoCE frame with ICMP port unreachable; a socket held on that port keeps it quiet.
    "udp_sink": KERNEL_IP4,
}
_UNITS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "sec": 1e6, "bytes": 1e-6, "KB": 1e-3, "MB": 1.0, "GB": 1e3}


def qperf_figures(text: str) -> dict:
    """rc_lat in us and rc_bw in MB/s as a qperf client printed them (qperf's units, 1000-based),
    and whether they are sane: a one-way latency of 1 us .. 100 ms, a bandwidth of 0.1 MB/s ..
    10 GB/s (rxe under TCG: ~200-500 us, ~10-30 MB/s)."""
    lat = re.search(QPERF_LAT, text)
    bw = re.search(QPERF_BW, text)
    f = {"rc_lat_us": round(float(lat.group(1).replace(",", "")) * _UNITS[lat.group(2)], 3) if lat else None,
         "rc_bw_MBps": round(float(bw.group(1).replace(",", "")) * _UNITS[bw.group(2)], 3) if bw else None}
    f["ok"] = (f["rc_lat_us"] is not None and 1 <= f["rc_lat_us"] <= 1e5
               and f["rc_bw_MBps"] is not None and 0.1 <= f["rc_bw_MBps"] <= 1e4)
    return f


def guest_script(cells: list[tuple[str, str]]) -> str:
    """A step <role>-<cell> per (OUR role, cell). The stock client retries until our server listens."""
    lines = []
    for role, c in cells:
        spec = CELLS[c]
        if role == "server":
            # Retried only while the connection cannot be set up (our server not listening
            # yet); any other failure ends the cell. Every attempt's output is kept.
            cmd = spec["stock_client"]
            retry_on = spec.get("retry_on", r"REJECTED\|UNREACHABLE\|ADDR_ERROR\|ROUTE_ERROR")
            # not before our server's process answers ARP (wait_arp); qperf's client first
            # dials the namespace kernel's address over TCP, which our server shares; perftest -R's
            # client survives no REJ (verbs.py, VERBS_ROLES): its REQ waits for the CM's resend
            body = (wait_arp(STACK_IP4) if c in ("rping", "rping6", "ucmatose", "udaddy") else "") + (retry_loop(
                f'timeout {STEP_TIMEOUT} {cmd} >/tmp/o 2>/tmp/e; rc=$?; cat /tmp/o /tmp/e >/tmp/all; '
                f'[ $rc != 0 ] && grep -q "{retry_on}" /tmp/all', CONNECT_S, keep="/tmp/all") + '; echo "attempts: $try"; ')
        else:
            body = f'timeout {STEP_TIMEOUT} {spec["stock_server"]} >/tmp/o 2>/tmp/e; rc=$?; '
        # stdout and stderr apart: rping's disconnect notice would otherwise split a ping line
        body += ('if [ $(wc -l </tmp/o) -le 40 ]; then cat /tmp/o; else head -n 3 /tmp/o; echo ...; '
                 'tail -n 3 /tmp/o; fi; cat /tmp/e; exit $rc')
        lines.append(f"uroce-step {role}-{c} sh -c '{body}'")
    lines.append("exit 0")
    return "\n".join(lines)


def host_script(uroce: str, cells: list[tuple[str, str]], out: str) -> str:
    """Ours, cell by cell in the guest's order, between host_step()'s markers; our client
    retries until the stock server listens."""
    lines = ["set -u"]
    for role, c in cells:
        pcap = os.path.join(out, f"{role}-{c}.pcap")
        ours = CELLS[c]["our_server" if role == "server" else "our_client"].format(pcap=pcap)
        tool, rest = ours.split(" ", 1)
        run = f"{shlex.quote(uroce)} {tool} {EAL} -- {rest} >{out}/{role}-{c}.out 2>&1; rc=$?"
        if role == "server" and CELLS[c].get("udp_sink"):
            sink = (f"import socket, signal; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                    f"s.bind(('{CELLS[c]['udp_sink']}', {ROCE_PORT})); signal.pause()")
            run = f'python3 -c "{sink}" & sink=$!; {run}; kill $sink; wait $sink 2>/dev/null'
        if role == "client":
            run = retry_loop(f"{run}; [ $rc != 0 ] && "
                             f"grep -q 'REJECTED\\|ADDR_ERROR\\|UNREACHABLE\\|timed out' {out}/{role}-{c}.out", CONNECT_S,
                             keep=f"{out}/{role}-{c}.out")
        lines += host_step(f"{role}-{c}", f"{run}; head -n 3 {out}/{role}-{c}.out; tail -n 6 {out}/{role}-{c}.out")
    return "\n".join(lines)


def tshark_cm(pcap: str) -> dict:
    """CM messages in the capture as tshark names them, and any malformed / error marks."""
    if not os.path.exists(pcap):
        return {"rc": None, "mads": [], "bad": ["no capture"]}
    # Wireshark's RPC-over-RDMA heuristic claims any short RC SEND payload (perftest -R's 2- and
    # 4-byte messages) and marks it malformed, rxe's frames as much as ours: it is switched off.
    tshark = ["tshark", "--disable-protocol", "rpcordma"]
    r = subprocess.run([*tshark, "-r", pcap, "-Y", "infiniband.mad", "-T", "fields", "-e", "_ws.col.Info"],
                       capture_output=True, text=True, check=False)
    mads = [re.sub(r"^CM: ", "", line.strip()) for line in r.stdout.splitlines() if line.strip()]
    # RoCEv2 over IPv6 leaves the UDP checksum 0 (rxe does too: A17.4.2 lets the ICRC cover
    # the packet); Wireshark calls that an error for IPv6, so exactly that case is discounted.
    b = subprocess.run([*tshark, "-r", pcap, "-Y", "_ws.malformed || (_ws.expert.severity >= error "
                        "&& !(ipv6 && udp.checksum == 0))"],
                       capture_output=True, text=True, check=False)
    return {"rc": r.returncode, "mads": mads, "bad": [x for x in b.stdout.splitlines() if x.strip()]}


def run_matrix(out: str, uroce: str, roles: list[str], cells: list[str], timeout: float) -> dict:
    """One boot (run_cells), our stack first as the server of every cell, then as the client; per
    cell also both tools' output checks, the qperf figures and the CM MADs tshark finds in our
    capture."""
    res: dict = {"cells": {}, "boots": {}}

    def check(role: str, c: str, cell: dict, ctx: dict) -> None:
        spec = CELLS[c]
        our_out_path = os.path.join(ctx["rdir"], f"{role}-{c}.out")
        our_out = open(our_out_path).read() if os.path.exists(our_out_path) else ""
        stock_ok = re.search(spec["stock_client_ok" if role == "server" else "stock_server_ok"],
                             ctx["stock_out"]) is not None
        our_ok = re.search(spec.get(f"our_{role}_ok", spec.get("our_ok", "")), our_out) is not None
        ts = tshark_cm(cell["pcap"])
        mads_ok = all(m in ts["mads"] for m in spec["mads"]) and not ts["bad"]
        cell.update({"cell": c, "stock_output_ok": stock_ok, "our_output_ok": our_ok, "tshark_mads": ts["mads"],
                     "tshark_bad": ts["bad"][:5], "our_output": our_out_path})
        cell["ok"] = cell["ok"] and stock_ok and our_ok and mads_ok
        if spec.get("figures"):  # what the qperf client printed: the stock one, or ours
            cell["figures"] = qperf_figures(ctx["stock_out"] if role == "server" else our_out)
            cell["ok"] = cell["ok"] and cell["figures"]["ok"]

    steps = [(role, c) for role in roles for c in cells]
    run_cells(res, uroce, out, "cm", steps, guest_script(steps), lambda rdir: host_script(uroce, steps, rdir),
              check, ipv6=any(c.endswith("6") for c in cells), timeout=timeout)
    res["ok"] = matrix_ok(res)
    return res


def table(res: dict) -> str:
    rows = [("cell", "uroce", "stock tool", "stock ok", "uroce ok", "ms (uroce)", "RoCE frames",
             "ICRC bad", "dump --verify", "CM MADs (tshark)", "figures", "result")]
    for cell in res["cells"].values():
        f = cell.get("figures")
        rows.append((cell["cell"], cell["ours"], "client" if cell["ours"] == "server" else "server",
                     "yes" if cell["stock_output_ok"] else "no", "yes" if cell["our_output_ok"] else "no",
                     str(cell["host_step"].get("ms", "-")), str(cell["roce_frames"]), str(cell["icrc_bad"]),
                     verify_text(cell["dump_verify_rc"]), " ".join(dict.fromkeys(cell["tshark_mads"])) or "-",
                     f"rc_lat {f['rc_lat_us']} us, rc_bw {f['rc_bw_MBps']} MB/s" if f else "-",
                     "PASS" if cell["ok"] else "FAIL"))
    return md_table(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    matrix_args(ap, "cm", list(CELLS), list(CELLS), 600, "default: all cells")
    a = ap.parse_args(argv)
    return matrix_main(a, "cm", run_matrix, table)

if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        close_sessions()
