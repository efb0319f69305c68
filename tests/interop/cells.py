"""What the interop matrices (pingpong.py, perf.py, verbs.py, cm.py) share: our port's --vdev on
the tap, the guest's and the host's step lines, the one cell runner (run_cells: a boot, then per
cell both sides' exit codes, `uroce dump --verify` and the ICRC check of our capture, then the
matrix's own checks), a matrix's CLI (matrix_args, matrix_main), and the tables' helpers
(perftest result rows, our counters)."""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time

from capture import pcap_summary
from guest import log, preflight, run_single, sh

# ------------------------------------------------------------- our stack's port on the tap
# net_af_packet's RX ring: the kernel copies every frame of the tap into it and drops the frame
# when the ring is full, silently (DPDK 22.11's PMD does not report those drops). Its default,
# 512 frames of 2048 bytes, holds ~25 ms of what the TCG guest sends in a READ response stream,
# less than our polling process may be descheduled on a loaded 2-core host; 16384 frames hold
# ~1 s. (The frames once thought lost here were lost in the guest's qdisc: guest/init.)
AFP_FRAMES = 16384

# Our RC local ACK timeout in the cells (`--qp-timeout` of `uroce pingpong` and `uroce perf`):
# code 18, 1.07 s a try, where rdma-core's pingpong and perftest take 14 (67 ms). rxe in the TCG
# guest stalls for hundreds of ms on a loaded host: on 2026-12-02 a 640 ms stall spent all 7
# retries of 67 ms (pingpong client/rc6), and another spent those of our `uroce perf` in perf
# server/write_bw_b ("transport retry counter exceeded"). The cells check interop, not the timer:
# the wire is the same but for when a resend goes out (a loss cell's few timeouts cost 1 s each).
OUR_QP_TIMEOUT = 18
# A boot whose guest NIC stalls (guest.NicWatch: a QEMU fault, no uroce process on the path it
# watches) is booted again, whole, at most this many times; the cells are judged on the last boot.
NIC_STALL_BOOTS = 1


def afp_eal(mtu: int = 1500) -> str:
    """The EAL arguments of one of our processes on the tap: its own EAL (--no-shconf), no
    hugepages, and the --vdev of our port. MTU 9000 (path MTU 4096): ring frames of 8192 bytes
    (the PMD indexes frames at framesz steps, so framesz must divide blocksz)."""
    frame = 2048 if mtu <= 1500 else 8192
    return ("--no-huge --no-pci --no-shconf -m 256 -l 0 --log-level=lib.*:error "
            f"--vdev=net_af_packet0,iface=$UROCE_TAP,blocksz={max(frame, 4096)},framesz={frame},"
            f"framecnt={AFP_FRAMES if mtu <= 1500 else AFP_FRAMES // 4}")


# ------------------------------------------------------------- the matrices' shared cell runner
# The pingpong, perf, verbs and CM matrices (cm.py) all run the same way: per boot one guest
# script of `uroce-step <role>-<cell> ...` steps, our stack as server in some and as client in
# others, and one host script running our side of the same steps in the same order, each between
# the markers host_step() writes; then per cell the guest step's and the host step's exit codes,
# `uroce dump --verify` and the ICRC check of our capture <out>/<role>-<cell>.pcap, plus the
# matrix's own checks. One boot serves both our roles: a boot costs 10-18 s under TCG.

# A client that starts before its server listens tries again after RETRY_PAUSE_S, until RETRY_S
# seconds of wall time have passed since its first try: retry_loop(). The server's start-up (EAL,
# or a process under TCG) takes 0.3-1 s; a pause of 1 s added 0.5 s to every such cell on average,
# 0.2 s adds 0.1 s. The bound is wall time, the tries included, so that a client that keeps
# failing ends its own cell and leaves the boot's time to the cells after it (a bound on the
# number of tries let a qperf client that took 2 s a try hold the boot for 1,000 s).
RETRY_PAUSE_S = 0.2
RETRY_S = 90
LAST_TRY = "--- try {}, the last:"  # retry_loop's line before the last try's output (last_try splits there)


def retry_loop(body: str, retry_s: float = RETRY_S, keep: str | None = None) -> str:
    """sh: body (a command list ending in one whose status says "try again") again, RETRY_PAUSE_S
    apart, while that status is 0 and less than retry_s seconds have passed since the first try;
    $try counts the tries. keep: the file each try writes its output to (the caller reads the
    last try's there). Every earlier try's is kept too, under a line that numbers and times it,
    and printed once the loop ends, ahead of whatever the caller prints of the last: a client
    that could not connect for 98 s (our qperf client in CI) shows why in every try, not only
    in its last."""
    save = f'{{ echo "--- try $try, retried at $(date +%T):"; cat {keep}; }} >>{keep}.tries; ' if keep else ""
    show = f"; if [ -s {keep}.tries ]; then cat {keep}.tries; echo \"{LAST_TRY.format('$try')}\"; fi" if keep else ""
    clear = f"rm -f {keep}.tries; " if keep else ""
    return (f"{clear}try=0; retry_end=$(( $(date +%s) + {round(retry_s)} )); while :; do try=$((try + 1)); "
            f"{body} || break; [ $(date +%s) -lt $retry_end ] || break; {save}sleep {RETRY_PAUSE_S}; done{show}")


def last_try(text: str) -> str:
    """The last try's part of a retry_loop output: what follows its "--- try N, the last:" line
    (the whole text when there was one try). An earlier try's "Connection refused" is why the
    loop tried again, not the run's result."""
    return re.split(r"^(?:\s*[\d.]+ )?" + re.escape(LAST_TRY).replace(r"\{\}", r"\d+") + "$", text, flags=re.M)[-1]


def wait_arp(ip: str, tries: int = 90) -> str:
    """sh (the guest): wait, up to tries ARP requests a second apart, until ip answers. Our stack
    answers ARP for its address only while one of our processes runs, and an rdma_cm REQ sent
    before it does is never answered: the kernel CM sends it again only after its response
    timeout, 4-6 s (it cost every rdma_cm cell with a stock client about 5 s)."""
    return f"for j in $(seq {tries}); do arping -q -f -c 1 -w 1 -I eth0 {ip} && break; done; "


def guest_step(name: str, cmd: str, timeout: int, retry_on: str | None = None,
               after: str = "cat /tmp/o; exit $rc", first: str = "") -> str:
    """A `uroce-step` line of a guest batch: `first` (sh, e.g. wait_arp), then cmd under busybox
    timeout, its output in /tmp/o, then `after`. With retry_on: cmd again (retry_loop) while its
    output matches that grep pattern (a stock client before our server listens)."""
    run = f"timeout {timeout} {cmd} >/tmp/o 2>&1; rc=$?; "
    if retry_on:
        run = retry_loop(f'{run}grep -q "{retry_on}" /tmp/o', keep="/tmp/o") + "; "
    return f"uroce-step {name} sh -c '{first}{run}{after}'"


def host_step(name: str, cmd: str) -> list[str]:
    """Host script lines that run cmd (which sets $rc) between the markers
    UROCE-HOST-STEP-BEGIN NAME epoch= and UROCE-HOST-STEP-END NAME rc= ms= epoch=."""
    return [f"t=$(date +%s%N); echo UROCE-HOST-STEP-BEGIN {name} epoch=$(( t / 1000000000 ))", cmd,
            f'echo "UROCE-HOST-STEP-END {name} rc=$rc ms=$(( ($(date +%s%N) - t) / 1000000 )) epoch=$(date +%s)"']


def host_steps(host_text: str) -> dict[str, dict]:
    steps = {m.group(1): {"rc": int(m.group(2)), "ms": int(m.group(3)), "epoch_end": int(m.group(4))} for m in
             re.finditer(r"UROCE-HOST-STEP-END (\S+) rc=(\d+) ms=(\d+) epoch=(\d+)", host_text)}
    for m in re.finditer(r"UROCE-HOST-STEP-BEGIN (\S+) epoch=(\d+)", host_text):
        steps.setdefault(m.group(1), {})["epoch_begin"] = int(m.group(2))
    return steps


def step_window(cell: dict) -> tuple[int, int]:
    """The seconds of the epoch a cell's host step ran in, one more either side: where a boot's
    guest capture holds the cell's frames (read_pcap's window; the whole capture without markers)."""
    hs = cell["host_step"]
    return hs.get("epoch_begin", 0) - 1, hs.get("epoch_end", 2**32) + 1


def dump_verify(uroce: str, pcap: str) -> dict:
    if not os.path.exists(pcap):
        return {"rc": None, "out": "no capture"}
    r = sh([uroce, "dump", "--verify", pcap], check=False)
    return {"rc": r.returncode, "out": r.stdout[-3000:]}


def _section(text: str, begin: str, end: str) -> str:
    i = text.find(begin)
    if i < 0:
        return ""
    j = text.find(end, i)
    return text[i:j if j >= 0 else len(text)]


# Debian 12's rping (rdma-core 44) may exit 255 after a run that went well: once the last CM
# event is handled, the main thread destroys the event channel, and the CM thread, back in
# rdma_get_cm_event, then fails on it ("rdma_get_cm_event: Bad file descriptor") and exits.
# rdma-core fixed it in 2025 (pull request 1622, "rping: Fix spurious failure return codes").
# Only that exit is forgiven: the disconnect seen, that line last, and the matrix's own checks
# (every ping's data, -V) still apply to the output.
# (A guest line starts with its time: a step's section ends with its END line's.)
RPING_EXIT_RACE = re.compile(r"DISCONNECT EVENT.*\n.*rdma_get_cm_event: Bad file descriptor\n[\d. ]*\Z", re.S)


def exit_ok(rc, out: str) -> bool:
    """A side's exit code as a pass: 0, or stock rping's exit race above."""
    return rc == 0 or (rc == 255 and RPING_EXIT_RACE.search(out) is not None)


def run_cells(res: dict, uroce: str, out: str, boot: str, cells: list[tuple[str, str]], guest_script: str,
              host_script, check=None, **run_opts) -> None:
    """One boot (run_single with run_opts) in <out>/our-<boot>: cells are (our role, cell) in the
    order of the steps <role>-<cell> of guest_script and host_script(rdir) (our side). Adds
    res["boots"][boot] (with the dump --verify of the guest's capture of the whole boot) and
    res["cells"]["<role>/<cell>"]; check(role, cell, result, ctx) may add fields and clear
    result["ok"], with ctx = {"rdir", "run", "guest_text", "host_text", "stock_out", "our_out"}."""
    rdir = os.path.join(out, f"our-{boot}")
    stalls = []  # boots whose guest NIC stalled (guest.NicWatch), kept beside rdir
    while True:
        os.makedirs(rdir, exist_ok=True)
        r = run_single(rdir, guest_script, host_script(rdir), nic_watch=True, **run_opts)
        if r["guest"]["nic_stall_s"] is None or len(stalls) == NIC_STALL_BOOTS:
            break
        kept = f"{rdir}-nic-stall{len(stalls) + 1}"
        os.rename(rdir, kept)
        stalls.append({"at_s": r["guest"]["nic_stall_s"], "dir": kept})
        log(f"boot {boot}: the guest's NIC stalled {r['guest']['nic_stall_s']} s in (files in {kept}): "
            "booting it again")
    host_text = open(r["host"]["log"]).read() if "host" in r else ""
    guest_text = open(r["guest"]["log"]).read() if r["guest"].get("log") else ""
    steps = host_steps(host_text)
    res["boots"][boot] = {"boot_s": r.get("boot_s"), "total_s": r.get("total_s"),
                          "guest_rc": r["guest"]["rc"], "host_rc": r.get("host", {}).get("rc"),
                          "guest_log": r["guest"]["log"], "host_log": r.get("host", {}).get("log"),
                          "guest_pcap": r["pcap"], "guest_pcap_summary": r["pcap_summary"],
                          "guest_dump_verify_rc": dump_verify(uroce, r["pcap"])["rc"], "nic_stalls": stalls}
    for role, c in cells:
        step = f"{role}-{c}"
        pcap = os.path.join(rdir, f"{step}.pcap")
        g = r["guest"]["steps"].get(step, {})
        hs = steps.get(step, {})
        d = dump_verify(uroce, pcap)
        ps = pcap_summary(pcap)
        # (the name ends at a newline or a space: write_bw is not write_bw_b)
        stock_out = _section(guest_text, f"UROCE-STEP-BEGIN {step}\n", f"UROCE-STEP-END {step} ")
        our_out = _section(host_text, f"UROCE-HOST-STEP-BEGIN {step} ", f"UROCE-HOST-STEP-END {step} ")
        cell = {"ours": role, "guest_step": g, "host_step": hs, "dump_verify_rc": d["rc"],
                "roce_frames": ps["roce"], "icrc_bad": ps["icrc_bad"], "opcodes": ps["opcodes"], "pcap": pcap,
                "ok": (exit_ok(g.get("rc"), stock_out) and exit_ok(hs.get("rc"), our_out) and d["rc"] == 0
                       and ps["roce"] > 0 and ps["icrc_bad"] == 0)}
        if d["rc"] != 0:
            cell["dump_tail"] = d["out"][-800:]
        if check:
            check(role, c, cell, {"rdir": rdir, "run": r, "guest_text": guest_text, "host_text": host_text,
                                  "stock_out": stock_out, "our_out": our_out})
        res["cells"][f"{role}/{c}"] = cell


def matrix_ok(res: dict) -> bool:
    """Every cell passed, and every boot's guest capture passes dump --verify."""
    return (bool(res["cells"]) and all(c["ok"] for c in res["cells"].values())
            and all(b["guest_dump_verify_rc"] == 0 for b in res["boots"].values()))


def md_table(rows: list[tuple]) -> str:
    """rows[0] is the header."""
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["| " + " | ".join(r[i].ljust(w[i]) for i in range(len(r))) + " |" for r in rows]
    out.insert(1, "|" + "|".join("-" * (x + 2) for x in w) + "|")
    return "\n".join(out)


def verify_text(rc) -> str:
    return "ok" if rc == 0 else f"rc={rc}"


def matrix_args(p: argparse.ArgumentParser, name: str, cells: list[str], default: list[str],
                timeout: float, cells_help: str) -> None:
    """A matrix's options: the ones matrix_main reads."""
    p.add_argument("--uroce", default=os.environ.get("UROCE_BIN", "build/apps/uroce"),
                   help="the uroce binary (default $UROCE_BIN or build/apps/uroce)")
    p.add_argument("--out", default=os.environ.get("UROCE_INTEROP_OUT") or
                   f"/tmp/uroce-interop-{name}-{os.getpid()}")
    p.add_argument("--roles", nargs="+", default=["server", "client"], choices=("server", "client"),
                   help="our roles (one guest boot runs them all, server first)")
    p.add_argument("--cells", nargs="+", default=default, choices=cells, help=cells_help)
    p.add_argument("--timeout", type=float, default=timeout, help="per boot")
    p.add_argument("--keep", action="store_true",
                   help="keep the captures of a passing run too (a failing run always keeps them)")


def prune_captures(out: str) -> tuple[int, int]:
    """Remove the .pcap files under out; (how many, bytes)."""
    n = size = 0
    for root, _dirs, files in os.walk(out):
        for f in files:
            if f.endswith(".pcap"):
                path = os.path.join(root, f)
                size += os.path.getsize(path)
                os.remove(path)
                n += 1
    return n, size


def matrix_main(a, name: str, run, table, capture_gb: float = 0.5) -> int:
    """A matrix's CLI (a: --uroce, --out, --roles, --cells, --timeout, --keep): preflight and
    capture_gb GB free in --out (what the matrix's captures take at most), then
    res = run(out, uroce, roles, cells, timeout), <out>/<name>.json, table(res) and the boots
    printed; a passing run's captures removed unless --keep; exit 0 only if the matrix passed."""
    if (rc := preflight(a.uroce)) is not None:
        return rc
    t0 = time.monotonic()
    os.makedirs(a.out, exist_ok=True)
    free_gb = shutil.disk_usage(a.out).free / 1e9
    if free_gb < capture_gb:
        print(f"{a.out} has {free_gb:.1f} GB free; the {name} matrix's captures take up to {capture_gb} GB: "
              "free some space or point --out / $UROCE_INTEROP_OUT elsewhere", file=sys.stderr)
        return 1
    res = run(a.out, os.path.abspath(a.uroce), a.roles, a.cells, a.timeout)
    res["total_s"] = round(time.monotonic() - t0, 2)
    with open(os.path.join(a.out, f"{name}.json"), "w") as f:
        json.dump(res, f, indent=1, default=list)
    print(table(res))
    for boot, b in res["boots"].items():
        log(f"our {boot}: boot {b['boot_s']} s, boot+cells {b['total_s']} s, guest capture "
            f"{b['guest_pcap_summary']['roce']} RoCE frames, dump --verify {verify_text(b['guest_dump_verify_rc'])}, "
            f"logs {b['guest_log']} {b['host_log']}")
    log(f"results: {os.path.join(a.out, name + '.json')}; total {res['total_s']} s; "
        f"{'all cells passed' if res['ok'] else 'FAILED'}")
    if res["ok"] and not a.keep:
        n, size = prune_captures(a.out)
        log(f"removed the {n} captures of this passing run ({size / 1e6:.0f} MB); --keep keeps them")
    return 0 if res["ok"] else 1


_BW_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
_LAT_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+"
                      r"([\d.]+)\s+([\d.]+)\s*$")


def perf_rows(text: str) -> list[str]:
    """perftest-format result rows (bw: 5 columns, lat: 9) in a tool's output, compacted."""
    rows = []
    for line in text.splitlines():
        line = re.sub(r"^\s*[\d.]+ ", "", line) if re.match(r"^\s*\d+\.\d{3} ", line) else line
        m = _LAT_ROW.match(line) or _BW_ROW.match(line)
        if m:
            g = m.groups()
            rows.append(f"{g[0]}B x{g[1]}: " + (f"avg {g[3]} MB/s" if len(g) == 5 else f"typ {g[4]} us"))
    return rows


_COUNTERS = re.compile(r"^\s*(?:[\d.]+ )?# counters:(.*)$", re.M)  # host log lines carry a time
# What the table shows of our counters (include/uroce/counters.h): the hook's losses, our
# requester's retransmissions and their causes, our responder's answers to rxe's resends.
SHOWN_COUNTERS = (("hook_rx_dropped", "rx lost"), ("hook_tx_dropped", "tx lost"),
                       ("retransmits", "retransmits"), ("local_ack_timeout_err", "timeouts"),
                       ("rcvd_seq_err", "seq NAKs rcvd"), ("implied_nak_seq_err", "implied NAKs"),
                       ("duplicate_request", "dup requests"), ("seq_nak_sent", "seq NAKs sent"),
                       ("read_replayed", "reads replayed"))


def parse_counters(text: str) -> dict[str, int]:
    m = _COUNTERS.findall(text)
    return {k: int(v) for k, v in (kv.split("=", 1) for kv in m[-1].split())} if m else {}


def counters_text(counters: dict[str, int]) -> str:
    return ", ".join(f"{label} {counters[k]}" for k, label in SHOWN_COUNTERS
                     if counters.get(k)) or "-"
