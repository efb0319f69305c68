"""The `uroce pingpong` interop matrix (meson test interop-pingpong): our stack against the stock
ibv_{rc,uc,ud,srq}_pingpong on rxe, both roles, plus rc over IPv6 GIDs (docs/INTEROP.md)."""
from __future__ import annotations

import os
import shlex

from cells import OUR_QP_TIMEOUT, afp_eal, guest_step, host_step, matrix_ok, md_table, run_cells, verify_text
from guest import GUEST_IP4, KERNEL_IP4, STACK_IP4, STACK_IP6, STACK_MAC

PP_TOOLS = ("rc", "uc", "ud", "srq")
# Per tool: the stock tool's and our flags (both sides get the same ones, as rdma-core wants).
# rc/uc/srq keep rdma-core's default size, 4096 (4 packets per message at path MTU 1024: FIRST/
# MIDDLE/LAST); UD's message must fit the 1024-byte path MTU of a 1500-byte link; -c validates.
PP_FLAGS = {"rc": "-n 50 -c", "uc": "-n 50 -c", "ud": "-s 1024 -n 50 -c",
            "srq": "-n 64 -q 4 -c", "rc6": "-s 1024 -n 50 -c"}
PP_STEP_TIMEOUT = 150      # one stock tool run in the guest (rxe retries forever: bound it)
PP_HOST_TIMEOUT = 150      # --timeout of one `uroce pingpong`


def _pp_tool(cell: str) -> str:
    return "rc" if cell == "rc6" else cell


def pp_guest_script(cells: list[tuple[str, str]]) -> str:
    """The guest's batch: one uroce-step <role>-<cell> per (our role, cell): 'server' (the stock
    tool is the client and retries until our server listens on 10.70.0.2) or 'client' (the
    stock tool is the server). Fails a step on "invalid data in page" (rdma-core -c prints it
    and still exits 0)."""
    lines = []
    for role, c in cells:
        cmd = f"ibv_{_pp_tool(c)}_pingpong -g {'$GID6' if c == 'rc6' else '$GID4'} {PP_FLAGS[c]}"
        lines.append(guest_step(f"{role}-{c}", f"{cmd} {KERNEL_IP4}" if role == "server" else cmd,
                                PP_STEP_TIMEOUT, "Couldn.t connect" if role == "server" else None,
                                'cat /tmp/o; [ $rc = 0 ] || exit $rc; ! grep -q "invalid data" /tmp/o'))
    lines.append("exit 0")
    return "\n".join(lines)


def pp_host_script(uroce: str, cells: list[tuple[str, str]], out: str) -> str:
    """Our side: `uroce pingpong` once per cell, in the guest's order, each with its own EAL
    (--no-shconf) and its own capture, between host_step()'s markers."""
    lines = ["set -u"]
    for role, c in cells:
        pcap = os.path.join(out, f"{role}-{c}.pcap")
        ours = (f"--ip {STACK_IP4} --mac {STACK_MAC} --timeout {PP_HOST_TIMEOUT} --qp-timeout {OUR_QP_TIMEOUT} --pcap {pcap} "
                f"--transport {_pp_tool(c)} {PP_FLAGS[c]}")
        if c == "rc6":
            ours += f" --ip6 {STACK_IP6} -g 1"
        ours += f" --listen {KERNEL_IP4}" if role == "server" else f" {GUEST_IP4}"
        lines += host_step(f"{role}-{c}", f"{shlex.quote(uroce)} pingpong {afp_eal()} -- {ours} --counters; rc=$?")
    return "\n".join(lines)


def run_pingpong_matrix(out: str, uroce: str, roles: list[str], cells: list[str],
                        timeout: float = 900, cache: str | None = None) -> dict:
    """One guest boot (IPv6 on when an rc6 cell is asked for) that runs every cell in turn
    (run_cells), our stack first as the server of each, then as the client."""
    res: dict = {"cells": {}, "boots": {}}

    def name(_role: str, c: str, cell: dict, _ctx: dict) -> None:
        cell["tool"] = f"ibv_{_pp_tool(c)}_pingpong" + (" (IPv6 GID)" if c == "rc6" else "")

    steps = [(role, c) for role in roles for c in cells]
    run_cells(res, uroce, out, "pingpong", steps, pp_guest_script(steps),
              lambda rdir: pp_host_script(uroce, steps, rdir), name,
              ipv6="rc6" in cells, timeout=timeout, cache=cache)
    res["ok"] = matrix_ok(res)
    return res


def pp_table(res: dict) -> str:
    rows = [("tool", "uroce", "stock tool", "guest rc", "uroce rc", "ms (uroce)", "RoCE frames",
             "ICRC bad", "dump --verify", "result")]
    for cell in res["cells"].values():
        rows.append((cell["tool"], cell["ours"], "client" if cell["ours"] == "server" else "server",
                     str(cell["guest_step"].get("rc", "-")), str(cell["host_step"].get("rc", "-")),
                     str(cell["host_step"].get("ms", "-")), str(cell["roce_frames"]),
                     str(cell["icrc_bad"]), verify_text(cell["dump_verify_rc"]), "PASS" if cell["ok"] else "FAIL"))
    return md_table(rows)
