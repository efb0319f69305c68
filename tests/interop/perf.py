"""The `uroce perf` interop matrix (meson test interop-perf): our stack against the stock
perftest 4.5 ib_{send,write,read,atomic}_{bw,lat} on rxe, both roles, on 1500- and 9000-byte
links, with loss injected by our port (data checked with verify_data.py) (docs/INTEROP.md)."""
from __future__ import annotations

import os
import re
import shlex
import time

import verify_data
from capture import read_pcap
from cells import (OUR_QP_TIMEOUT, afp_eal, counters_text, guest_step, host_step, matrix_ok, md_table,
                   parse_counters, perf_rows, run_cells, step_window, verify_text)
from guest import GUEST_IP4, KERNEL_IP4, STACK_IP4, STACK_IP6, STACK_MAC

# Per cell: (stock tool, flags both sides get, our test). Small iteration counts: the guest is
# QEMU/TCG. Sizes keep each run to a few hundred RoCE frames at path MTU 1024.
PERF_CELLS = {
    "write_bw":    ("ib_write_bw",  "-s 16384 -n 50",            "write_bw"),
    "send_lat":    ("ib_send_lat",  "-s 64 -n 100",              "send_lat"),
    "send_bw":     ("ib_send_bw",   "-s 16384 -n 50",            "send_bw"),
    "read_bw":     ("ib_read_bw",   "-s 16384 -n 50",            "read_bw"),
    "atomic_bw_faa": ("ib_atomic_bw", "-A FETCH_AND_ADD -n 100", "atomic_bw"),
    "atomic_bw_cas": ("ib_atomic_bw", "-A CMP_AND_SWAP -n 100",  "atomic_bw"),
    "write_lat":   ("ib_write_lat", "-s 64 -n 100",              "write_lat"),
    "read_lat":    ("ib_read_lat",  "-s 64 -n 100",              "read_lat"),
    "atomic_lat":  ("ib_atomic_lat", "-n 100",                   "atomic_lat"),
    "write_bw_q4": ("ib_write_bw",  "-q 4 -s 4096 -n 25",        "write_bw"),
    "write_bw_b":  ("ib_write_bw",  "-b -s 4096 -n 50",          "write_bw"),
    "send_bw_b":   ("ib_send_bw",   "-b -s 4096 -n 50",          "send_bw"),
    "read_bw_b":   ("ib_read_bw",   "-b -s 4096 -n 50",          "read_bw"),
    "send_bw_q4":  ("ib_send_bw",   "-q 4 -s 4096 -n 25",        "send_bw"),
    "read_bw_q4":  ("ib_read_bw",   "-q 4 -s 4096 -n 25",        "read_bw"),
    # Sizes: -a runs 2 B .. 8 MiB (perftest's MAX_SIZE) at 5 iterations each, plus 1 B.
    "write_bw_a":  ("ib_write_bw",  "-a -n 5",                   "write_bw"),
    # -o 1: rxe queues every response of every outstanding READ at once, and 5 x 8 MiB
    # overflow the guest's transmit queue (guest/init).
    "read_bw_a":   ("ib_read_bw",   "-a -n 5 -o 1",              "read_bw"),
    "send_bw_a":   ("ib_send_bw",   "-a -n 5",                   "send_bw"),
    "write_bw_1b": ("ib_write_bw",  "-s 1 -n 50",                "write_bw"),
    # perftest's warm-up: tx-depth untimed WRITEs before the timed 50 (ours as the client).
    "write_bw_warm": ("ib_write_bw", "--perform_warm_up -s 16384 -n 50", "write_bw"),
    # perftest's noPeak: the run timed as a whole, no clock read per post (uroce compare uses it).
    "write_bw_nopeak": ("ib_write_bw", "-N -s 64 -n 500", "write_bw"),
    "read_bw_1b":  ("ib_read_bw",   "-s 1 -n 50",                "read_bw"),
    "send_bw_1b":  ("ib_send_bw",   "-s 1 -n 50",                "send_bw"),
    "write_bw_loss1": ("ib_write_bw", "-s 16384 -n 50",          "write_bw"),
    "write_bw_loss5": ("ib_write_bw", "-s 16384 -n 50",          "write_bw"),
    "read_bw_loss1":  ("ib_read_bw",  "-s 16384 -n 50",          "read_bw"),
    "read_bw_loss5":  ("ib_read_bw",  "-s 16384 -n 50",          "read_bw"),
    # Path MTU 4096: the guest's link has MTU 9000 (rxe's active MTU 4096), a boot of its own.
    "write_bw_mtu4096": ("ib_write_bw", "-m 4096 -s 65536 -n 50", "write_bw"),
    "read_bw_mtu4096":  ("ib_read_bw",  "-m 4096 -s 65536 -n 50", "read_bw"),
    "send_lat_mtu4096": ("ib_send_lat", "-m 4096 -s 4096 -n 100", "send_lat"),
    "send_bw_mtu4096":  ("ib_send_bw",  "-m 4096 -s 65536 -n 50", "send_bw"),
    "write_lat_mtu4096": ("ib_write_lat", "-m 4096 -s 4096 -n 100", "write_lat"),
    "read_lat_mtu4096": ("ib_read_lat", "-m 4096 -s 4096 -n 100", "read_lat"),
    "atomic_bw_mtu4096": ("ib_atomic_bw", "-m 4096 -A FETCH_AND_ADD -n 100", "atomic_bw"),
    "atomic_lat_mtu4096": ("ib_atomic_lat", "-m 4096 -n 100", "atomic_lat"),
    # RoCEv2 over IPv6 GIDs: rxe's GID index 2 (fd00:70::1), ours -x 1 (fd00:70::3), neighbour
    # discovery instead of ARP; the 1500-byte boot gets IPv6 when this cell is asked for.
    "write_bw6":   ("ib_write_bw",  "-s 65536 -n 50",            "write_bw"),
}
PERF_IPV6 = {"write_bw6"}  # cells over IPv6 GIDs
PERF_JUMBO = {c for c in PERF_CELLS if c.endswith("_mtu4096")}  # cells on a 9000-byte link
# Loss cells: our port loses this fraction of the frames it receives and of those it sends
# (`uroce perf --drop-rate`, drivers/dpdk/fault_io.h; seeded, so a cell's losses repeat), so rxe
# and our stack both retransmit. The cell also checks the data (verify_data.py) and that the
# counters show the losses and the retransmissions.
PERF_LOSS = {"write_bw_loss1": 0.01, "write_bw_loss5": 0.05, "read_bw_loss1": 0.01,
             "read_bw_loss5": 0.05}
PERF_DEFAULT_CELLS = ["write_bw", "send_lat", "send_bw", "read_bw", "atomic_bw_faa", "atomic_bw_cas",
                      "write_lat", "read_lat", "atomic_lat", "write_bw_q4", "write_bw_b", "send_bw_b",
                      "read_bw_b", "send_bw_q4", "read_bw_q4", "write_bw_a", "read_bw_a", "send_bw_a", "write_bw_1b", "read_bw_1b", "send_bw_1b",
                      "write_bw_warm", "write_bw_nopeak",
                      *PERF_LOSS, *sorted(PERF_IPV6), *sorted(PERF_JUMBO)]
PERF_STEP_TIMEOUT = 180    # one stock tool run in the guest (rxe retries forever: bound it)
PERF_HOST_TIMEOUT = 150    # --timeout of one `uroce perf`


def perf_guest_script(cells: list[tuple[str, str]]) -> str:
    """The guest's batch, one uroce-step <role>-<cell> per (our role, cell): 'server' (the stock
    tool is the client and retries until our server listens on 10.70.0.2) or 'client'."""
    lines = []
    for role, c in cells:
        tool, flags, _ = PERF_CELLS[c]
        cmd = f"{tool} -d rxe0 -x {'$GID6' if c in PERF_IPV6 else '$GID4'} -F {flags}"
        lines.append(guest_step(f"{role}-{c}", f"{cmd} {KERNEL_IP4}" if role == "server" else cmd, PERF_STEP_TIMEOUT,
                                "Couldn.t connect\\|Unable to init the socket" if role == "server" else None))
    lines.append("exit 0")
    return "\n".join(lines)


def perf_buffer_path(pcap: str) -> str:
    return pcap[:-len(".pcap")] + ".buf"


def perf_host_cmd(uroce: str, role: str, cell: str, pcap: str) -> str:
    _, flags, test = PERF_CELLS[cell]
    mtu = 9000 if cell in PERF_JUMBO else 1500
    ours = (f"{test} --ip {STACK_IP4} --mac {STACK_MAC} --timeout {PERF_HOST_TIMEOUT} --qp-timeout {OUR_QP_TIMEOUT} "
            f"--pcap {pcap} --port-mtu {mtu} {flags}")
    if cell in PERF_IPV6:
        ours += f" --ip6 {STACK_IP6} -x 1"
    if cell in PERF_LOSS:
        seed = 1 + sorted(PERF_CELLS).index(cell) + (100 if role == "client" else 0)
        ours += (f" --drop-rate {PERF_LOSS[cell]} --drop-seed {seed} "
                 f"--save-buffer {perf_buffer_path(pcap)}")
    ours += f" --listen {KERNEL_IP4}" if role == "server" else f" {GUEST_IP4}"
    return f"{shlex.quote(uroce)} perf {afp_eal(mtu)} -- {ours} --counters"


def perf_host_script(uroce: str, cells: list[tuple[str, str]], out: str) -> str:
    """Our side: one `uroce perf` per cell, in the guest's order, each with its own EAL and its
    own capture, between host_step()'s markers."""
    lines = ["set -u"]
    for role, c in cells:
        lines += host_step(f"{role}-{c}", perf_host_cmd(uroce, role, c, os.path.join(out, f"{role}-{c}.pcap")) + "; rc=$?")
    return "\n".join(lines)


def perf_loss_check(uroce_role: str, cell: str, pcap: str, guest_frames: list[dict],
                    host_step: dict, counters: dict[str, int]) -> dict:
    """A loss cell's data check (verify_data.check_cell) plus: the hook lost frames (a cell sends
    few frames one way, e.g. ACKs, so not necessarily both ways) and the requester resent: our
    `retransmits` counter, or rxe's resent PSNs in our capture."""
    _, flags, test = PERF_CELLS[cell]
    size = int(re.search(r"-s (\d+)", flags).group(1))
    iters = int(re.search(r"-n (\d+)", flags).group(1))
    buf = perf_buffer_path(pcap)
    if not os.path.exists(buf):
        return {"ok": False, "why": "no --save-buffer file"}
    ours = open(buf, "rb").read()
    our_frames = [f for f in map(verify_data.roce, read_pcap(pcap)) if f]
    lo = host_step.get("epoch_begin", int(time.time()) - 3600) - 120
    hi = host_step.get("epoch_end", int(time.time())) + 120
    r = verify_data.check_cell(test, uroce_role, size, iters, ours, our_frames, guest_frames,
                               STACK_IP4, GUEST_IP4, lo, hi)
    lost = counters.get("hook_rx_dropped", 0) + counters.get("hook_tx_dropped", 0)
    # Our requester (write_bw client, read_bw client) must have resent; rxe as the requester
    # must have resent to us (duplicates in our capture) and our responder answered them.
    requester_us = uroce_role == "client"
    resent = (counters.get("retransmits", 0) if requester_us else r.get("peer_retransmitted", 0))
    r["lost"] = lost
    r["resent"] = resent
    if r["ok"] and (not lost or not resent):
        r["ok"] = False
        r["why"] = f"no loss or no retransmission seen: {counters}"
    return r


def run_perf_matrix(out: str, uroce: str, roles: list[str], cells: list[str],
                    timeout: float = 1500, cache: str | None = None) -> dict:
    """Per link MTU one guest boot (IPv6 on when an IPv6 cell is in it) running every cell in turn
    (run_cells), our stack first as the server of each, then as the client; per cell also both
    tools' result rows, our counters and, for the loss cells, the data check (against the
    frames the guest captured while the cell ran)."""
    res: dict = {"cells": {}, "boots": {}}

    def check(role: str, c: str, cell: dict, ctx: dict) -> None:
        tool, flags, test = PERF_CELLS[c]
        counters = parse_counters(ctx["our_out"])
        cell.update({"tool": f"{tool} {flags}", "test": test, "counters": counters,
                     "host_cmd": perf_host_cmd(uroce, role, c, cell["pcap"]),
                     "stock_rows": perf_rows(ctx["stock_out"]), "our_rows": perf_rows(ctx["our_out"])})
        if c in PERF_LOSS:
            guest_frames = [f for f in map(verify_data.roce, read_pcap(ctx["run"]["pcap"], step_window(cell)))
                            if f]
            cell["loss"] = PERF_LOSS[c]
            cell["data"] = perf_loss_check(role, c, cell["pcap"], guest_frames, cell["host_step"], counters)
            cell["ok"] = cell["ok"] and cell["data"]["ok"]

    for mtu, group in ((1500, [c for c in cells if c not in PERF_JUMBO]),
                       (9000, [c for c in cells if c in PERF_JUMBO])):  # one boot per link MTU
        steps = [(role, c) for role in roles for c in group]
        if steps:
            run_cells(res, uroce, out, "perf" if mtu == 1500 else f"perf-mtu{mtu}", steps, perf_guest_script(steps),
                      lambda rdir, s_=steps: perf_host_script(uroce, s_, rdir), check, mtu=mtu, timeout=timeout,
                      cache=cache, ipv6=bool(PERF_IPV6 & set(group)))
    res["ok"] = matrix_ok(res)
    return res


def data_text(cell: dict) -> str:
    d = cell.get("data")
    if not d:
        return "-"
    if not d["ok"]:
        return "FAIL: " + d.get("why", "")
    via = f"seed {d['seed']}" if "seed" in d else "guest capture"
    return (f"ok ({d['bytes']} B of {d['messages']} msgs, {via}; rxe resent {d['peer_retransmitted']})")


def perf_table(res: dict) -> str:
    rows = [("cell", "stock tool", "uroce", "guest rc", "uroce rc", "ms (uroce)", "RoCE frames",
             "ICRC bad", "dump --verify", "stock result", "uroce result", "uroce counters", "data",
             "result")]
    for name, cell in res["cells"].items():
        tool = cell["tool"] + (f" + {cell['loss']:.0%} loss" if "loss" in cell else "")
        rows.append((name.split("/", 1)[1], tool, cell["ours"],
                     str(cell["guest_step"].get("rc", "-")), str(cell["host_step"].get("rc", "-")),
                     str(cell["host_step"].get("ms", "-")), str(cell["roce_frames"]),
                     str(cell["icrc_bad"]), verify_text(cell["dump_verify_rc"]),
                     "; ".join(cell["stock_rows"][-1:]) or "-",
                     "; ".join(cell["our_rows"][-1:]) or "-", counters_text(cell["counters"]),
                     data_text(cell), "PASS" if cell["ok"] else "FAIL"))
    return md_table(rows)
