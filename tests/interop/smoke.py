"""The interop smoke checks (meson test interop-smoke, docs/INTEROP.md): (a) the guest boots
and pings over the tap with jumbo frames, IPv4 and IPv6; (b) two guests run stock rdma-core and
perftest rxe<->rxe; (c) dpdk-testpmd on the tap counts the guest's RoCEv2 frames, the guest's
out-of-band exchange answered by oob_stub."""
from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import time

import build_guest
from cells import retry_loop
from guest import (GUEST_MAC, KERNEL_IP4, STACK_IP4, STACK_MAC, HarnessError, log, preflight,
                   run_pair, run_single)

def oob_stub(listen: str, port: int, qpn: int, psn: int, gid_ip: str, count: int,
             timeout: float) -> int:
    """Answers ibv_{rc,uc,ud}_pingpong's TCP exchange (52-byte "%04x:%06x:%06x:%s" + NUL,
    then the client's "done\\0") with a QP at gid_ip that nobody serves: the client then
    sends RoCEv2 to gid_ip and, never ACKed, retransmits."""
    gid = socket.inet_pton(socket.AF_INET6, "::ffff:" + gid_ip if "." in gid_ip else gid_ip)
    msg = (f"{0:04x}:{qpn:06x}:{psn:06x}:" + gid.hex()).encode() + b"\0"
    assert len(msg) == 52, len(msg)
    fam = socket.AF_INET6 if ":" in listen else socket.AF_INET
    srv = socket.socket(fam, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((listen, port))
    srv.listen(4)
    srv.settimeout(timeout)
    print(f"oob-stub: listening on {listen}:{port}, answering {msg[:-1].decode()}", flush=True)
    for _ in range(count):
        c, peer = srv.accept()
        c.settimeout(timeout)
        buf = b""
        while len(buf) < 52:
            chunk = c.recv(52 - len(buf))
            if not chunk:
                break
            buf += chunk
        print(f"oob-stub: from {peer[0]}: {buf.rstrip(bytes(1)).decode(errors='replace')!r} "
              f"({len(buf)} bytes)", flush=True)
        c.sendall(msg)
        done = c.recv(16)
        print(f"oob-stub: then {done!r}", flush=True)
        c.close()
    return 0




def smoke_boot_ping(out: str) -> dict:
    """(a) boot, rxe ready (IPv4 + IPv6 GIDs), the guest pings the namespace kernel (.2) over
    the tap, IPv4 and IPv6, with jumbo frames (MTU 9000)."""
    script = "\n".join([
        "uroce-step devinfo ibv_devinfo -d rxe0",
        "uroce-step ping4 ping -c 3 -W 3 -s 8000 10.70.0.2",
        "uroce-step ping6 ping -6 -c 3 -W 3 fd00:70::2",
        "/usr/bin/rdma link show",
        "cat /etc/uroce-guest-manifest",
    ])
    return run_single(os.path.join(out, "a-boot-ping"), script, mtu=9000, ipv6=True)


def smoke_pair(out: str) -> dict:
    """(b) two guests: stock ibv_rc_pingpong and ib_write_bw rxe<->rxe, pcap of A."""
    server = "\n".join([
        "uroce-step rc_pingpong ibv_rc_pingpong -g $GIDX -s 1024 -n 5",
        "uroce-step write_bw ib_write_bw -d rxe0 -x $GIDX -F -s 8192 -n 50",
    ])
    client = "\n".join([
        "sleep 1",
        "uroce-step rc_pingpong sh -c '" +
        retry_loop("ibv_rc_pingpong -g $GIDX -s 1024 -n 5 $PEER; rc=$?; [ $rc != 0 ]", 30) + "; exit $rc'",
        "uroce-step write_bw sh -c '" +
        retry_loop("ib_write_bw -d rxe0 -x $GIDX -F -s 8192 -n 50 $PEER; rc=$?; [ $rc != 0 ]", 30) + "; exit $rc'",
    ])
    return run_pair(os.path.join(out, "b-pair"), server, client)


def smoke_testpmd(out: str) -> dict:
    """(c) dpdk-testpmd (net_af_packet on the tap) counts the guest's RoCEv2 frames while the
    guest's ibv_rc_pingpong targets 10.70.0.3 / 02:00:00:70:00:03, which never answers."""
    host = (f"exec python3 {shlex.quote(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'harness.py'))} oob-stub "
            f"--listen {KERNEL_IP4} --gid-ip {STACK_IP4} --timeout 120")
    script = "\n".join([
        # the stack's address without ARP (nobody answers for .3 yet)
        f"/usr/bin/ip neigh replace {STACK_IP4} lladdr {STACK_MAC} nud permanent dev eth0",
        # rxe treats retry_cnt=7 (ibv_rc_pingpong's) as infinite: bound it
        "uroce-step rc_unanswered timeout 5 ibv_rc_pingpong -g $GIDX -s 64 -n 1 10.70.0.2",
        "exit 0",
    ])
    return run_single(os.path.join(out, "c-testpmd"), script, host, testpmd=True)


def check(cond: bool, what: str, failures: list[str]) -> None:
    log(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def smoke(out: str, only: list[str] | None = None) -> int:
    if (rc := preflight()) is not None:
        return rc
    t0 = time.monotonic()
    failures: list[str] = []
    results: dict = {}
    os.makedirs(out, exist_ok=True)
    t = time.monotonic()
    img = build_guest.build(build_guest.cache_dir())
    results["image_s"] = round(time.monotonic() - t, 2)
    log(f"guest image ready ({results['image_s']} s): {img['dir']}")
    cells = [("a", smoke_boot_ping), ("b", smoke_pair), ("c", smoke_testpmd)]
    for key, fn in cells:
        if only and key not in only:
            continue
        log(f"--- smoke ({key}): {fn.__doc__.strip().splitlines()[0]}")
        try:
            r = fn(out)
        except (HarnessError, subprocess.CalledProcessError, OSError) as e:
            check(False, f"({key}) harness error: {e}", failures)
            continue
        results[key] = r
        ps = r["pcap_summary"]
        if key == "a":
            g = r["guest"]
            check(g["rc"] == 0, f"(a) guest script rc={g['rc']} steps={g['steps']}", failures)
            check(g["info"].get("gid4") not in (None, "-") and g["info"].get("gid6") not in
                  (None, "-"), f"(a) rxe0 GIDs ready: {g['info']}", failures)
            check(ps["frames"] > 0 and ps["arp"] > 0, f"(a) pcap has frames: {ps['frames']} "
                  f"(arp {ps['arp']})", failures)
        elif key == "b":
            for n, g in r["guests"].items():
                check(g["rc"] == 0 and set(g["steps"]) == {"rc_pingpong", "write_bw"} and
                      all(s["rc"] == 0 for s in g["steps"].values()),
                      f"(b) guest {n}: rc={g['rc']} steps={g['steps']}", failures)
            check(ps["roce"] > 0 and ps["icrc_bad"] == 0,
                  f"(b) pcap RoCEv2 frames {ps['roce']}, ICRC ok {ps['icrc_ok']} bad "
                  f"{ps['icrc_bad']}, opcodes {ps['opcodes']}", failures)
            check(52 in ps["oob_payloads"] and 108 in ps["oob_payloads"],
                  f"(b) OOB payload sizes seen on tcp/18515: "
                  f"{sorted(set(ps['oob_payloads']))}", failures)
        elif key == "c":
            tp = r.get("testpmd", {})
            g = r["guest"]
            st = g["steps"].get("rc_unanswered", {})
            check(st.get("rc") in (124, 143), f"(c) guest pingpong bounded by timeout "
                  f"(rc={st.get('rc')})", failures)
            host_log = open(r["host"]["log"]).read() if "host" in r else ""
            check("oob-stub: from" in host_log, "(c) OOB exchange with the stub happened",
                  failures)
            check(ps["roce"] >= 3 and ps["icrc_bad"] == 0,
                  f"(c) pcap: {ps['roce']} RoCEv2 frames (retransmissions), ICRC bad "
                  f"{ps['icrc_bad']}, opcodes {ps['opcodes']}", failures)
            check(tp.get("verbose_udp_frames", 0) >= 3 and GUEST_MAC in tp.get("udp_from", []),
                  f"(c) dpdk-testpmd counted {tp.get('verbose_udp_frames')} UDP(RoCEv2) frames "
                  f"from {tp.get('udp_from')}; RX-packets {tp.get('rx_packets')}, pcap "
                  f"{ps['roce']} RoCEv2", failures)
        log(f"({key}) boot {r.get('boot_s')} s, total {r.get('total_s')} s")
    results["total_s"] = round(time.monotonic() - t0, 2)
    with open(os.path.join(out, "smoke.json"), "w") as f:
        json.dump(results, f, indent=1, default=list)
    log(f"results: {os.path.join(out, 'smoke.json')}; total {results['total_s']} s")
    if failures:
        log(f"{len(failures)} check(s) FAILED:")
        for f_ in failures:
            log("  " + f_)
        return 1
    log("all interop smoke checks passed")
    return 0
