#!/usr/bin/env python3
"""uroce RDMA CM interop cells: uroce's CM over QP1 against stock librdmacm tools on Linux
rdma_rxe in the QEMU guest of harness.py, both roles (docs/CM.md, docs/INTEROP.md).

Per role one guest boot that runs every cell in turn (the stock tool in the guest, `uroce ...`
on the host tap through DPDK's net_af_packet). The side that connects retries until the
listener is up (a REJ "invalid service ID", reason 8, until then). Per cell: both tools' exit
codes and output checks, `uroce dump --verify` of our capture, the harness's own ICRC check,
and tshark: every CM MAD must decode as the CM message we expect, with no malformed mark.

CLI: cm.py [--roles server client] [--cells rping] [--out DIR] [--uroce build/apps/uroce]
Needs root and /dev/net/tun (else exit 77 = skipped), like the other interop suites.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness as h  # noqa: E402

STEP_TIMEOUT = 150        # one stock tool run in the guest
HOST_TIMEOUT = 120        # --timeout of one `uroce` run
RETRIES = 60              # connect attempts of the active side, one a second
EAL = ("--no-huge --no-pci --no-shconf -m 256 -l 0 --log-level=lib.*:error "
       "--vdev=net_af_packet0,iface=$UROCE_TAP")
OURS = f"--ip {h.STACK_IP4} --mac {h.STACK_MAC} --timeout {HOST_TIMEOUT}"

# Per cell: the stock tool as server and as client (guest), ours as server and as client (host),
# what each side's output must show, and the CM messages the capture must hold.
#   {peer} = the server's address as the client dials it, {pcap} = our capture.
PINGS = 1000
PINGS6 = 200
MSGS, MSG_BYTES = 100, 512
CELLS = {
    "rping": {
        "stock_server": f"rping -s -a {h.GUEST_IP4} -v -C {PINGS}",
        "stock_client": f"rping -c -a {h.STACK_IP4} -v -V -C {PINGS}",
        "our_server": f"rping {OURS} -s -a {h.STACK_IP4} -v --pcap {{pcap}} --counters",
        "our_client": f"rping {OURS} -c -a {h.GUEST_IP4} -v -V -C {PINGS} --pcap {{pcap}} --counters",
        # rping prints one line per ping on both sides; the stock server then reports the
        # disconnect on stderr ("wait for RDMA_READ_ADV state 10") and still exits 0.
        "stock_server_ok": rf"server ping data: rdma-ping-{PINGS - 1}: ",
        "stock_client_ok": rf"ping data: rdma-ping-{PINGS - 1}: ",
        "our_ok": rf"ping data: rdma-ping-{PINGS - 1}: ",
        "mads": ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"],
    },
    # rping over IPv6 GIDs: rdma_cm's header carries IPv6 addresses (IP version 6).
    "rping6": {
        "stock_server": f"rping -s -a {h.GUEST_IP6} -v -C {PINGS6}",
        "stock_client": f"rping -c -a {h.STACK_IP6} -v -V -C {PINGS6}",
        "our_server": f"rping {OURS} --ip6 {h.STACK_IP6} -s -a {h.STACK_IP6} -v --pcap {{pcap}} --counters",
        "our_client": f"rping {OURS} --ip6 {h.STACK_IP6} -c -a {h.GUEST_IP6} -v -V -C {PINGS6} --pcap {{pcap}} --counters",
        "stock_server_ok": rf"server ping data: rdma-ping-{PINGS6 - 1}: ",
        "stock_client_ok": rf"ping data: rdma-ping-{PINGS6 - 1}: ",
        "our_ok": rf"ping data: rdma-ping-{PINGS6 - 1}: ",
        "mads": ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"],
    },
    # RC connection, then -C SENDs of -S bytes each way; the server disconnects.
    "ucmatose": {
        "stock_server": f"ucmatose -b {h.GUEST_IP4} -C {MSGS} -S {MSG_BYTES}",
        "stock_client": f"ucmatose -s {h.STACK_IP4} -C {MSGS} -S {MSG_BYTES}",
        "our_server": f"ucmatose {OURS} -b {h.STACK_IP4} -C {MSGS} -S {MSG_BYTES} --pcap {{pcap}} --counters",
        "our_client": f"ucmatose {OURS} -s {h.GUEST_IP4} -C {MSGS} -S {MSG_BYTES} --pcap {{pcap}} --counters",
        "stock_server_ok": r"data transfers complete\n(.|\n)*disconnected",
        "stock_client_ok": r"data transfers complete",
        "our_ok": r"data transfers complete(.|\n)*test complete",
        "mads": ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"],
    },
    # UD: SIDR REQ / REP, then -C datagrams with immediate data each way.
    "udaddy": {
        "stock_server": f"udaddy -b {h.GUEST_IP4} -C {MSGS} -S {MSG_BYTES}",
        "stock_client": f"udaddy -s {h.STACK_IP4} -C {MSGS} -S {MSG_BYTES}",
        "our_server": f"udaddy {OURS} -b {h.STACK_IP4} -C {MSGS} -S {MSG_BYTES} --pcap {{pcap}} --counters",
        "our_client": f"udaddy {OURS} -s {h.GUEST_IP4} -C {MSGS} -S {MSG_BYTES} --pcap {{pcap}} --counters",
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
        "stock_client": f"{_stock} {h.STACK_IP4}",
        "our_server": f"{_ours} --listen {h.STACK_IP4}",
        "our_client": f"{_ours} {h.GUEST_IP4}",
        "stock_server_ok": rf"(?m)Data ex. method : rdma_cm(.|\n)*{_row}",
        "stock_client_ok": rf"(?m)Data ex. method : rdma_cm(.|\n)*{_row}",
        "our_ok": rf"(?m)Data ex. method : rdma_cm(.|\n)*{_row}",
        "mads": ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"],
        # perftest's client gives up at once when its REQ is rejected (our server not up yet)
        "retry_on": "REJECTED\\|UNREACHABLE\\|Unable to perform rdma_client",
    }


def guest_script(role: str, cells: list[str]) -> str:
    """role = OUR role. The stock client retries until our server listens."""
    lines = []
    for c in cells:
        spec = CELLS[c]
        if role == "server":
            # Retried only while the connection cannot be set up (our server not listening
            # yet); any other failure ends the cell. Every attempt's output is kept.
            cmd = spec["stock_client"]
            retry_on = spec.get("retry_on", r"REJECTED\|UNREACHABLE\|ADDR_ERROR\|ROUTE_ERROR")
            body = (f': >/tmp/all; for i in $(seq {RETRIES}); do timeout {STEP_TIMEOUT} {cmd} >/tmp/o 2>/tmp/e; '
                    f'rc=$?; cat /tmp/o /tmp/e >>/tmp/all; [ $rc = 0 ] && break; '
                    f'grep -q "{retry_on}" /tmp/all || break; '
                    f': >/tmp/all; sleep 1; done; echo "attempts: $i"; ')
        else:
            body = f'timeout {STEP_TIMEOUT} {spec["stock_server"]} >/tmp/o 2>/tmp/e; rc=$?; '
        # stdout and stderr apart: rping's disconnect notice would otherwise split a ping line
        body += ('if [ $(wc -l </tmp/o) -le 40 ]; then cat /tmp/o; else head -n 3 /tmp/o; echo ...; '
                 'tail -n 3 /tmp/o; fi; cat /tmp/e; exit $rc')
        lines.append(f"uroce-step {c} sh -c '{body}'")
    lines.append("exit 0")
    return "\n".join(lines)


def host_script(uroce: str, role: str, cells: list[str], out: str) -> str:
    """Ours, cell by cell in the guest's order; our client retries until the stock server
    listens. Markers UROCE-HOST-STEP-BEGIN/END NAME rc= ms=."""
    lines = ["set -u"]
    for c in cells:
        pcap = os.path.join(out, f"{role}-{c}.pcap")
        ours = CELLS[c]["our_server" if role == "server" else "our_client"].format(pcap=pcap)
        tool, rest = ours.split(" ", 1)
        run = f"{shlex.quote(uroce)} {tool} {EAL} -- {rest} >{out}/{role}-{c}.out 2>&1; rc=$?"
        if role == "client":
            run = (f"for i in $(seq {RETRIES}); do {run}; [ $rc = 0 ] && break; "
                   f"grep -q 'REJECTED\\|ADDR_ERROR\\|UNREACHABLE\\|timed out' {out}/{role}-{c}.out || break; "
                   f"sleep 1; done")
        lines += [f"echo UROCE-HOST-STEP-BEGIN {c}; t=$(date +%s%N)", run,
                  f"head -n 3 {out}/{role}-{c}.out; tail -n 6 {out}/{role}-{c}.out",
                  f'echo "UROCE-HOST-STEP-END {c} rc=$rc ms=$(( ($(date +%s%N) - t) / 1000000 ))"']
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
    res: dict = {"cells": {}, "boots": {}}
    for role in roles:
        rdir = os.path.join(out, f"our-{role}")
        os.makedirs(rdir, exist_ok=True)
        r = h.run_single(rdir, guest_script(role, cells), host_script(uroce, role, cells, rdir),
                         ipv6=any(c.endswith("6") for c in cells), timeout=timeout)
        host_text = open(r["host"]["log"]).read() if "host" in r else ""
        guest_text = open(r["guest"]["log"]).read() if r["guest"].get("log") else ""
        host_steps = {m.group(1): {"rc": int(m.group(2)), "ms": int(m.group(3))} for m in
                      re.finditer(r"UROCE-HOST-STEP-END (\S+) rc=(\d+) ms=(\d+)", host_text)}
        res["boots"][role] = {"boot_s": r.get("boot_s"), "total_s": r.get("total_s"),
                              "guest_log": r["guest"]["log"], "host_log": r.get("host", {}).get("log")}
        for c in cells:
            spec = CELLS[c]
            pcap = os.path.join(rdir, f"{role}-{c}.pcap")
            g = r["guest"]["steps"].get(c, {})
            hs = host_steps.get(c, {})
            stock_out = h._section(guest_text, f"UROCE-STEP-BEGIN {c}", f"UROCE-STEP-END {c}")
            our_out_path = os.path.join(rdir, f"{role}-{c}.out")
            our_out = open(our_out_path).read() if os.path.exists(our_out_path) else ""
            stock_ok = re.search(spec["stock_client_ok" if role == "server" else "stock_server_ok"],
                                 stock_out) is not None
            our_ok = re.search(spec["our_ok"], our_out) is not None and hs.get("rc") == 0
            d = h.pp_dump_verify(uroce, pcap)
            ps = h.pcap_summary(pcap)
            ts = tshark_cm(pcap)
            mads_ok = all(m in ts["mads"] for m in spec["mads"]) and not ts["bad"]
            ok = (stock_ok and g.get("rc") == 0 and our_ok and d["rc"] == 0 and ps["roce"] > 0 and ps["icrc_bad"] == 0
                  and mads_ok)
            res["cells"][f"{role}/{c}"] = {
                "cell": c, "ours": role, "guest_step": g, "host_step": hs, "stock_output_ok": stock_ok,
                "our_output_ok": our_ok, "dump_verify_rc": d["rc"], "roce_frames": ps["roce"],
                "icrc_bad": ps["icrc_bad"], "tshark_mads": ts["mads"], "tshark_bad": ts["bad"][:5],
                "pcap": pcap, "our_output": our_out_path, "ok": ok}
    res["ok"] = bool(res["cells"]) and all(c["ok"] for c in res["cells"].values())
    return res


def table(res: dict) -> str:
    rows = [("cell", "uroce", "stock tool", "stock ok", "uroce ok", "ms (uroce)", "RoCE frames",
             "ICRC bad", "dump --verify", "CM MADs (tshark)", "result")]
    for cell in res["cells"].values():
        rows.append((cell["cell"], cell["ours"], "client" if cell["ours"] == "server" else "server",
                     "yes" if cell["stock_output_ok"] else "no", "yes" if cell["our_output_ok"] else "no",
                     str(cell["host_step"].get("ms", "-")), str(cell["roce_frames"]), str(cell["icrc_bad"]),
                     "ok" if cell["dump_verify_rc"] == 0 else f"rc={cell['dump_verify_rc']}",
                     " ".join(dict.fromkeys(cell["tshark_mads"])) or "-", "PASS" if cell["ok"] else "FAIL"))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["| " + " | ".join(r[i].ljust(w[i]) for i in range(len(r))) + " |" for r in rows]
    out.insert(1, "|" + "|".join("-" * (x + 2) for x in w) + "|")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--uroce", default=os.environ.get("UROCE_BIN", "build/apps/uroce"))
    ap.add_argument("--out", default=os.environ.get("UROCE_INTEROP_OUT") or f"/tmp/uroce-interop-cm-{os.getpid()}")
    ap.add_argument("--roles", nargs="+", default=["server", "client"], choices=("server", "client"))
    ap.add_argument("--cells", nargs="+", default=list(CELLS), choices=list(CELLS))
    ap.add_argument("--timeout", type=float, default=600, help="per boot")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("SKIP: interop tests need root (network namespaces, tap, QEMU)", flush=True)
        return 77
    if not os.path.exists("/dev/net/tun"):
        print("SKIP: /dev/net/tun is missing (no tap devices)", flush=True)
        return 77
    if not os.access(a.uroce, os.X_OK):
        print(f"uroce binary {a.uroce!r} is not executable", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    os.makedirs(a.out, exist_ok=True)
    res = run_matrix(a.out, os.path.abspath(a.uroce), a.roles, a.cells, a.timeout)
    res["total_s"] = round(time.monotonic() - t0, 2)
    with open(os.path.join(a.out, "cm.json"), "w") as f:
        json.dump(res, f, indent=1, default=list)
    print(table(res))
    h.log(f"results: {os.path.join(a.out, 'cm.json')}; total {res['total_s']} s; "
          f"{'all cells passed' if res['ok'] else 'FAILED'}")
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        for _s in list(h._sessions):
            _s.close()
