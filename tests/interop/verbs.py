"""The stock-on-uroce interop matrix (meson test interop-verbs): unmodified Debian 12 verbs,
rdma_cm, libfabric and qperf programs on the host under `uroce run` against the same binaries on
rxe in the guest, both roles (docs/INTEROP.md, docs/MIDDLEWARE.md)."""
from __future__ import annotations

import os
import re
import shlex
import sys
import time

import verify_data
from capture import read_pcap
from cells import (afp_eal, counters_text, guest_step, host_step, last_try, matrix_ok, md_table, perf_rows,
                   retry_loop, run_cells, step_window, verify_text, wait_arp)
from guest import GUEST_IP4, GUEST_IP6, KERNEL_IP4, NET4, STACK_IP4, STACK_IP6, STACK_MAC

HERE = os.path.dirname(os.path.abspath(__file__))
MIDDLEWARE = os.path.join(HERE, "..", "middleware")
sys.path.insert(0, MIDDLEWARE)
import mpi_program  # noqa: E402
from mpi_program import min_frames, pingpong_lines, run_ok  # noqa: E402

# The same unmodified Debian 12 binary on both sides: in the guest on rxe0, on the host under
# `uroce run` (apps/run: our libibverbs.so.1 and librdmacm.so.1 first in LD_LIBRARY_PATH) on our
# port on the tap. One guest boot for the whole matrix: every cell with our stack as server, then
# every cell with our stack as client. GID index: rxe's $GID4 (1), ours 3 (Linux's layout: the
# IPv4 RoCEv2 entry, docs/VERBS.md). Per cell: (stock tool, flags both sides get, loss).
# ib_read_bw gets -o 16 on both sides: perftest 4.5 advertises -o, else its device's
# max_qp_rd_atom (rxe 128, uroce 16), and takes the peer's value as its own max_rd_atomic at RTS
# without bounding it by its own device's, so a uroce client of an rxe server would ask for 128
# and ibv_modify_qp fails with EINVAL, as rxe's (rxe_qp_chk_attr) and mlx5's do beyond their caps.
VERBS_CELLS = {
    "rc_pingpong":    ("ibv_rc_pingpong", "-n 50 -c", 0),
    "ud_pingpong":    ("ibv_ud_pingpong", "-s 1024 -n 50 -c", 0),
    "write_bw":       ("ib_write_bw", "-s 16384 -n 50", 0),
    "read_bw":        ("ib_read_bw", "-o 16 -s 16384 -n 50", 0),
    "send_bw":        ("ib_send_bw", "-s 16384 -n 50", 0),
    "send_lat":       ("ib_send_lat", "-s 64 -n 100", 0),
    "rping":          ("rping", "-v -C 100", 0),
    "uc_pingpong":    ("ibv_uc_pingpong", "-n 50 -c", 0),
    # 4 QPs on one SRQ, 16 iterations each (iters count every QP's)
    "srq_pingpong":   ("ibv_srq_pingpong", "-n 64 -q 4 -c", 0),
    # -o 16 on the read and atomic tests, as ib_read_bw (above); ib_read_lat's and ib_atomic_bw's
    # servers advertise their max_qp_rd_atom too (rxe: "Outstand reads : 128").
    "atomic_bw":      ("ib_atomic_bw", "-o 16 -A FETCH_AND_ADD -n 100", 0),
    "write_lat":      ("ib_write_lat", "-s 64 -n 100", 0),
    "read_lat":       ("ib_read_lat", "-o 16 -s 64 -n 100", 0),
    # rdma_cm: ucmatose (RC, -C SENDs each way) and udaddy (UD over SIDR); the server binds its
    # RDMA address, the client dials it.
    "ucmatose":       ("ucmatose", "-C 10", 0),
    "udaddy":         ("udaddy", "-C 10", 0),
    # perftest -R: the out-of-band exchange over a first rdma_cm connection (no TCP), the test
    # QP connected by a second one; the client dials the server's RDMA address (no -x: the GID
    # comes from rdma_cm's route). Ours as the server only (VERBS_ROLES).
    "send_lat_R":     ("ib_send_lat", "-R -s 64 -n 100", 0),
    "write_bw_R":     ("ib_write_bw", "-R -s 16384 -n 50", 0),
    # perftest's variants: four QPs, both directions at once, every size (2 B to 8 MB, 5
    # iterations each), completion channels, the UC and UD transports, the old post API, and
    # the other atomic. UC keeps to 20 messages of 4 KB: a UC message lost at the tap's ring
    # is never resent, and the SEND server would wait for it.
    "write_bw_q4":    ("ib_write_bw", "-q 4 -s 16384 -n 50", 0),
    "send_bw_b":      ("ib_send_bw", "-b -s 16384 -n 50", 0),
    "write_bw_a":     ("ib_write_bw", "-a -n 5", 0),
    "send_lat_e":     ("ib_send_lat", "-e -s 64 -n 100", 0),
    "write_bw_uc":    ("ib_write_bw", "-c UC -s 4096 -n 20", 0),
    "send_bw_uc":     ("ib_send_bw", "-c UC -s 4096 -n 20", 0),
    "send_bw_ud":     ("ib_send_bw", "-c UD -s 1024 -n 50", 0),
    "send_lat_ud":    ("ib_send_lat", "-c UD -s 64 -n 100", 0),
    "write_bw_old":   ("ib_write_bw", "--use_old_post_send -s 16384 -n 50", 0),
    "atomic_lat_cas": ("ib_atomic_lat", "-o 16 -A CMP_AND_SWAP -n 100", 0),
    # IPv6 GIDs on a 9000-byte link, path MTU 4096: a boot of their own (VERBS_V6J).
    "rc_pingpong_6j": ("ibv_rc_pingpong", "-m 4096 -s 4096 -n 50 -c", 0),
    "write_bw_6j":    ("ib_write_bw", "-m 4096 -s 65536 -n 50", 0),
    "read_bw_6j":     ("ib_read_bw", "-m 4096 -o 16 -s 65536 -n 50", 0),
    "send_lat_6j":    ("ib_send_lat", "-m 4096 -s 4096 -n 100", 0),
    # libfabric 1.17's fi_pingpong (issue 21, docs/MIDDLEWARE.md): the verbs provider's msg
    # endpoint (rdma_cm), and ofi_rxm's rdm endpoint over it; -c checks every receive against the
    # sender's pattern. The control channel is TCP to the other side's kernel address, where the
    # client learns the server's fabric address (rxe0's, or uroce0's).
    "fi_msg":         ("fi_pingpong", "-p verbs -e msg -c -I 20", 0),
    "fi_rdm":         ("fi_pingpong", "-p verbs;ofi_rxm -e rdm -c -I 20", 0),
    # UCX 1.13's ucx_perftest (issue 21, docs/MIDDLEWARE.md), one batch of tests (UCX_BATCHES) over
    # rc_verbs (wired up through a ud_verbs endpoint) and one over ud_verbs alone.
    "ucx_rc":         ("ucx_perftest", "UCX_TLS=rc_verbs,ud_verbs:aux,self", 0),
    "ucx_ud":         ("ucx_perftest", "UCX_TLS=ud_verbs,self", 0),
    # Open MPI 4.1 (issue 21, docs/MIDDLEWARE.md): tests/middleware/mpi_pingpong.c, rank 0 on the
    # host (ours: under `uroce run` on the tap), rank 1 in the guest on rxe0, one mpirun (mpi_job),
    # pml ucx over rc_verbs and over ud_verbs; mpi_rc runs the same program over pml ob1, btl tcp
    # after it (the seed's comparison: the kernel's TCP between the same two hosts).
    "mpi_rc":         ("mpirun", "UCX_TLS=rc_verbs,ud_verbs:aux,self", 0),
    "mpi_ud":         ("mpirun", "UCX_TLS=ud_verbs,self", 0),
    # A rank killed (issue 21's robustness item): rank 0, ours, SIGKILLed by its PID in the 1 MiB
    # stream of an mpi_rc job; mpirun must end the job with an error within MPI_KILL_S, the guest's
    # orted and rank 1 must be gone, and no process of the job left on the host (mpi_kill_job).
    "mpi_kill":       ("mpirun", "UCX_TLS=rc_verbs,ud_verbs:aux,self", 0),
    # qperf 0.4.11 over rdma_cm (-cm1, which RoCE needs): our client against qperf's server on rxe.
    # Ours as the client only (VERBS_ROLES): qperf reaches its server's TCP control port and its
    # rdma_cm listener at one address, and the tap's kernel address is not uroce's.
    "qperf":          ("qperf", "-cm1 -t 1 rc_lat rc_bw rc_rdma_write_lat rc_rdma_write_bw rc_rdma_read_lat "
                                "rc_rdma_read_bw", 0),
    # Loss: our port loses this fraction of the frames it receives and of those it sends
    # (`uroce run --drop-rate`, a fixed --drop-seed per cell and role).
    "write_bw_loss1": ("ib_write_bw", "-s 16384 -n 50", 0.01),
    "write_bw_loss5": ("ib_write_bw", "-s 16384 -n 50", 0.05),
    "read_bw_loss1":  ("ib_read_bw", "-o 16 -s 16384 -n 50", 0.01),
    "read_bw_loss5":  ("ib_read_bw", "-o 16 -s 16384 -n 50", 0.05),
    "send_bw_loss1":  ("ib_send_bw", "-s 16384 -n 50", 0.01),
    "send_bw_loss5":  ("ib_send_bw", "-s 16384 -n 50", 0.05),
    # rping's client checks every ping's data (-V): what the server READ from it and WROTE back.
    # A lost frame of a ping costs a local ACK timeout (nothing follows it to show the gap):
    # 2.1 s (19, what the REQ carries, rxe's as ours), so 20 pings (~10 of them hit at 5%).
    "rping_loss5":    ("rping", "-v -C 20", 0.05),
}
# Cells run in these of our roles only (default: both). perftest -R with a stock client on uroce
# against a stock server on rxe races perftest itself: right after the last handshake on the
# channel the client sends the test connection's REQ, the server only then listens for it (rxe
# under TCG: after ~5 ms; ours answered 2 ms later: REJ, reason 8); the client's retry
# (rdma_cm_client_connection) then calls rdma_resolve_addr on the cm_ids, event channel and node
# array that rdma_cm_destroy_cma has just destroyed and freed (perftest v4.5-0.17): our client
# crashes there, and the rxe server, still listening for the test connection, takes the next
# try's channel REQ as it and never posts a receive on it (RNR NAKs for ever). docs/INTEROP.md.
VERBS_ROLES = {"send_lat_R": ("server",), "write_bw_R": ("server",), "qperf": ("client",),
               "mpi_rc": ("client",), "mpi_ud": ("client",), "mpi_kill": ("client",)}  # mpirun on the host dials the guest
# A loss cell's --drop-seed: 1 + its index here (+ 100 as the client), the sorted cells of the
# first matrix, so cells added later do not change the losses of the old ones. A lost last frame
# goes unrepaired: rping's client sends one DREQ, destroys its id and exits (the kernel CM, too,
# stops resending a DREQ when its id is destroyed), and rxe's rping server then waits for ever;
# with the seeds of the cells' sorted order after adding cells, client-rping_loss5 lost its DREQ.
VERBS_SEED_ORDER = ("read_bw", "read_bw_loss1", "read_bw_loss5", "rc_pingpong", "rping", "rping_loss5",
                    "send_bw", "send_bw_loss1", "send_bw_loss5", "send_lat", "ud_pingpong", "write_bw",
                    "write_bw_loss1", "write_bw_loss5")
VERBS_STEP_TIMEOUT = 150   # one stock tool run, either side (rxe retries forever: bound it)
VERBS_RETRY = {            # what a client prints while the server is not listening yet
    "ibv": "Couldn.t connect", "ib": "Couldn.t connect\\|Unable to init the socket",
    "rping": "REJECTED\\|UNREACHABLE\\|ADDR_ERROR\\|ROUTE_ERROR",
    "cma": "REJECTED\\|UNREACHABLE\\|ADDR_ERROR\\|ROUTE_ERROR",
    "fi": "Connection refused\\|No route to host",
    "ucx": "connect() failed",
    # qperf 0.4.11 sends its rdma_cm port before it listens (fixed upstream after 0.4.11, 118a571
    # "Fix rdmacm race"): a REQ that comes first is rejected, and the client runs again
    "qperf": "failed to connect\\|No route to host\\|Event rejected",
    # perftest -R's client gives up at once when its REQ is rejected (the server not up yet)
    "ibR": "REJECTED\\|UNREACHABLE\\|Unable to perform rdma_client",
    # mpirun does not retry: tests/interop/mpi_agent.sh waits for the guest's listener
    "mpi": None}
VERBS_OUR_GID = 3
FI_PORT = 47592                                      # fi_pingpong's control port (-B / -P)
FI_SIZES = ["64", "256", "1k", "4k", "64k", "1m"]    # fi_pingpong's default sizes, as it prints them
QPERF_PORT = 19766
# The guest's qperf server never ends by itself: our client ends it with qperf's quit test (the
# server's parent exits 0); without that it is stopped after QPERF_SERVE_S. qperf 0.4.11's server
# sends each test's rdma_cm port before it listens (VERBS_RETRY), so any test's REQ can come first
# and be rejected: our client runs a test at a time, each tried again alone (qperf_runs). Run
# whole and retried whole, the six tests needed 76 tries and 184 s in CI on 2026-12-04 (75 of
# the 213 REQs rejected: all six through on one try about once in 20).
QPERF_SERVE_S = 300
# ucx_perftest's batches: a test a line, "label args" ({dev}: the side's device and port, for the
# UCT tests). Each side reads its own copy (the server takes each test's parameters from its own
# line, the client's only at the start), so each names its own device. ud_verbs has no UCT put:
# UCP's put (over active messages) instead. -w: ucx_perftest warms up with 10,000 iterations by
# default, seconds under TCG.
UCX_BATCHES = {
    "ucx_rc": ["tag_lat -t tag_lat -s 64 -n 200 -w 10", "tag_bw -t tag_bw -s 65536 -n 20 -w 2",
               "put_lat -t put_lat -d {dev} -x rc_verbs -s 64 -n 200 -w 10",
               "put_bw -t put_bw -d {dev} -x rc_verbs -D zcopy -s 65536 -n 20 -w 2",
               "am_lat -t am_lat -d {dev} -x rc_verbs -s 8 -n 200 -w 10"],
    "ucx_ud": ["tag_lat -t tag_lat -s 64 -n 200 -w 10", "tag_bw -t tag_bw -s 65536 -n 20 -w 2",
               "ucp_put_lat -t ucp_put_lat -s 64 -n 200 -w 10", "ucp_put_bw -t ucp_put_bw -s 65536 -n 20 -w 2",
               "am_lat -t am_lat -d {dev} -x ud_verbs -s 8 -n 200 -w 10"],
}
UCX_PORT = 13337
# UCX_UD_VERBS_ETH_DGID_CHECK=n on both sides: UCX 1.13 drops a RoCEv2/IPv4 UD receive unless
# wc.sl says IPv4 as mlx5 encodes it, which neither rxe nor uroce does (docs/MIDDLEWARE.md).
# UROCE_PROGRESS=inline on ours, as in tests/middleware/ucx_mpi.py.
UCX_ENV = "UCX_UD_VERBS_ETH_DGID_CHECK=n"
UCX_FINAL = re.compile(r"Final:\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+")
# The MPI cells (mpi_rc, mpi_ud, mpi_kill): mpirun (in the harness's namespace) starts rank 0 there and rank
# 1's orted in the guest through tests/interop/mpi_agent.sh, which hands orted's command line to a
# busybox nc listener in the guest's step, one connection a job (MPI_JOBS), on a port of the cell's
# own (mpi_port: a job of a cell the guest is not in yet, after a cell that timed out, finds no
# listener instead of another cell's);
# mpirun's and orted's out-of-band TCP and btl tcp stay on the tap's subnet. Rank 0 is on the
# host's kernel address (mpirun takes it for its own node), rank 1 on the guest's. Sizes as
# tests/middleware/ucx_mpi.py's, MPI_ITERS each: rxe under TCG streams 1 MiB at 5-10 MB/s.
MPI_AGENT_PORT = 47600     # + the cell's index in MPI_JOBS (mpi_port)
MPI_SIZES = [64, 4096, 65536, 1048576]
MPI_ITERS = 20
MPI_STEP_TIMEOUT = 240     # one mpirun; the guest's step serves MPI_JOBS of them
MPI_GUEST_EXE = "/tmp/mpi_pingpong"    # from fw_cfg (run_verbs_matrix)
MPI_JOBS = {"mpi_rc": ("ucx", "tcp"), "mpi_ud": ("ucx",), "mpi_kill": ("ucx",)}
MPI_KILL_S = 30            # mpi_kill: how soon after the kill mpirun must have ended
MPIRUN = (f"mpirun --allow-run-as-root --leave-session-attached "
          f"--mca plm_rsh_agent 'env bash {os.path.join(HERE, 'mpi_agent.sh')}' "
          f"--mca oob_tcp_if_include {NET4}.0/24")
# pml ucx and no shared memory (ucx_mpi.py's MPI_UCX); ob1 over btl tcp on the tap's subnet
MPI_PML = {"ucx": "--mca pml ucx --mca btl self --mca osc ucx",
           "tcp": f"--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include {NET4}.0/24"}
# The cells on IPv6 GIDs (rxe's $GID6, our index 5: the IPv6 RoCEv2 entry after the IPv4 pair)
# over a 9000-byte link, path MTU 4096; the out-of-band TCP stays on IPv4.
VERBS_V6J = {c for c in VERBS_CELLS if c.endswith("_6j")}
VERBS_OUR_GID6 = 5
# read/atomic latency: the (non-duplex) server prints no result row; it ends after the
# exchange with the remote address block and a dashes line (perftest's RESULT_LINE)
VERBS_SERVER_NO_ROW = {"ib_read_lat", "ib_atomic_lat"}


def _verbs_family(tool: str, flags: str = "") -> str:
    """ibv (pingpong), ib (perftest over TCP), ibR (perftest -R), rping, cma (ucmatose, udaddy),
    fi (fi_pingpong), qperf, ucx (ucx_perftest), mpi (mpirun)."""
    if tool in ("fi_pingpong", "qperf", "ucx_perftest", "mpirun"):
        return {"fi_pingpong": "fi", "qperf": "qperf", "ucx_perftest": "ucx", "mpirun": "mpi"}[tool]
    if tool == "rping":
        return "rping"
    if tool in ("ucmatose", "udaddy"):
        return "cma"
    if tool.startswith("ibv_"):
        return "ibv"
    return "ibR" if re.search(r"(^| )-R( |$)", flags) else "ib"


def _cell_family(cell: str) -> str:
    return _verbs_family(*VERBS_CELLS[cell][:2])


def verbs_cmd(cell: str, side: str, server: bool, files: str = "/tmp") -> str:
    """The stock command line of one side of a cell: side 'rxe' (the guest) or 'uroce' (ours);
    server: whether that side is the server; files: where the files it reads are (ucx_batch), for
    an MPI cell's uroce side the MPI program."""
    tool, flags, _ = VERBS_CELLS[cell]
    fam = _cell_family(cell)
    v6 = cell in VERBS_V6J
    gid = ("$GID6" if v6 else "$GID4") if side == "rxe" else str(VERBS_OUR_GID6 if v6 else VERBS_OUR_GID)
    peer_oob = KERNEL_IP4 if side == "rxe" else GUEST_IP4   # the other side's TCP address
    own, other = (GUEST_IP4, STACK_IP4) if side == "rxe" else (STACK_IP4, GUEST_IP4)  # RDMA addresses
    if fam == "rping":  # rdma_cm: the server binds its RDMA address, the client dials it
        return f"rping -s -a {own} {flags}" if server else f"rping -c -a {other} -V {flags}"
    if fam == "cma":
        return f"{tool} -b {own} {flags}" if server else f"{tool} -s {other} {flags}"
    if fam == "fi":  # the provider string has a ';': quoted for the shell (and the guest's sh -c '...')
        flags = flags.replace("verbs;ofi_rxm", '"verbs;ofi_rxm"')
        # ofi_rxm sizes its verbs CQ (tx + rx size) x FI_UNIVERSE_SIZE (default 256): 196,608 entries,
        # past rxe's max_cqe (32,767), so rxe fails fi_enable ("Unable to create verbs CQ") unless the
        # universe is smaller (docs/MIDDLEWARE.md); uroce's max_cqe takes the default.
        env = "env FI_UNIVERSE_SIZE=16 " if side == "rxe" and "ofi_rxm" in flags else ""
        return f"{env}{tool} {flags} -B {FI_PORT}" if server else f"{env}{tool} {flags} -P {FI_PORT} {peer_oob}"
    if fam == "ucx":  # each side on its own port, the client's TCP to the other side's kernel address
        dev = "rxe0:1" if side == "rxe" else "uroce0:1"
        env = f"env {flags} UCX_NET_DEVICES={dev} {UCX_ENV}" + (" UROCE_PROGRESS=inline" if side == "uroce" else "")
        args = f"-p {UCX_PORT} -b {files}/{cell}.batch"
        return f"{env} ucx_perftest {args}" if server else f"{env} ucx_perftest {peer_oob} {args}"
    if fam == "mpi":  # the guest's side: orted, started through its listener, once a job (mpi_agent.sh)
        if side == "rxe" and cell == "mpi_kill":  # orted's status (the job killed), then none of it left
            return f'sh -c "nc -l -p {mpi_port(cell)} -e sh; echo orted rc=\\$?; sleep 1; ! pidof orted mpi_pingpong"'
        if side == "rxe":
            jobs = " ".join(str(j) for j in range(1, len(MPI_JOBS[cell]) + 1))
            return f'sh -c "for j in {jobs}; do nc -l -p {mpi_port(cell)} -e sh || exit; done"'
        return mpi_rank(cell, side, "ucx", files)
    if fam == "qperf":  # the server serves until the client's quit test (or QPERF_SERVE_S); the client
        opts = " ".join(w for w in flags.split() if not w.startswith("rc_"))  # without its tests (qperf_runs)
        return f"qperf -lp {QPERF_PORT}" if server else f"qperf {peer_oob} -lp {QPERF_PORT} {opts}"
    dev = "rxe0" if side == "rxe" else "uroce0"
    if fam == "ibR":
        cmd = f"{tool} -d {dev} -F {flags}"
        return cmd if server else f"{cmd} {other}"
    cmd = (f"{tool} -d {dev} -g {gid} {flags}" if fam == "ibv" else f"{tool} -d {dev} -x {gid} -F {flags}")
    return cmd if server else f"{cmd} {peer_oob}"


def mpi_port(cell: str) -> int:
    """The port of an MPI cell's listener in the guest (mpi_agent.sh's UROCE_MPI_AGENT_PORT)."""
    return MPI_AGENT_PORT + list(MPI_JOBS).index(cell)


def mpi_rank(cell: str, side: str, job: str, exe: str) -> str:
    """The command of one rank of an MPI cell's job (MPI_JOBS): exe (mpi_pingpong) with the
    UCX settings of the side (rxe: rank 1 in the guest; uroce: rank 0, run by verbs_host_cmd under
    `uroce run`, UROCE_PROGRESS=inline as in tests/middleware/ucx_mpi.py); no UCX settings on btl tcp."""
    prog = f"{exe} {','.join(map(str, MPI_SIZES))} {MPI_ITERS}"
    if job == "tcp":
        return prog
    dev = "rxe0:1" if side == "rxe" else "uroce0:1"
    env = f"env {VERBS_CELLS[cell][1]} UCX_NET_DEVICES={dev} {UCX_ENV}" + (" UROCE_PROGRESS=inline" if side == "uroce" else "")
    return f"{env} {prog}"


def mpi_job(cell: str, job: str, rank0: str) -> str:
    """sh: one mpirun of an MPI cell (MPI_JOBS), rank0 on the host, rank 1 in the guest; every
    process of the job has UROCE_MPI_AGENT_PORT in its environment (mpi_kill_job's check)."""
    return (f"timeout {MPI_STEP_TIMEOUT} env UROCE_MPI_AGENT_PORT={mpi_port(cell)} {MPIRUN} {MPI_PML[job]} "
            f"-np 1 --host {KERNEL_IP4} {rank0} : -np 1 --host {GUEST_IP4} {mpi_rank(cell, 'rxe', job, MPI_GUEST_EXE)}")


def mpi_jobs(cell: str, uroce_rank0: str, exe: str) -> str:
    """sh: the cell's mpirun jobs one after the other (MPI_JOBS; a line "# MPI job JOB" before
    each one's output), every job run whatever the one before it did (the guest serves each), the
    status the first failing job's; uroce_rank0: rank 0 of the ucx job under `uroce run`."""
    lines = []
    for job in MPI_JOBS[cell]:
        rank0 = uroce_rank0 if job == "ucx" else mpi_rank(cell, "uroce", job, exe)
        lines.append(f"echo '# MPI job {job}'; {mpi_job(cell, job, rank0)}; r2=$?; [ $r != 0 ] || r=$r2")
    return "(r=0; " + "; ".join(lines) + "; exit $r)"


def mpi_kill_job(cell: str, uroce_rank0: str, out: str, pcap: str) -> str:
    """sh (mpi_kill): the ucx job in the background, its output in out; once rank 0 has printed
    the 65536-byte line (the 1 MiB stream is next), rank 0 (mpirun's child; `uroce run` and env
    exec it) is SIGKILLed by its PID. Lines: "# killed rank 0 pid P", "# mpirun rc=R M ms after
    the kill", "# left: PID(COMM)... G ms after the kill" (processes with UROCE_MPI_AGENT_PORT in
    their environment: mpirun, the agent, rank 0; mpirun may end before its agent has, so they
    are looked for until none is left or MPI_KILL_S after the kill). Status 0 if P was found and
    killed, mpirun ended with an error (not its timeout) within MPI_KILL_S and nothing was left
    by then. Our capture, cut short by the kill, is cut after its last whole frame
    (capture.drop_partial_record)."""
    return (f"(echo '# MPI job ucx'; {mpi_job(cell, 'ucx', uroce_rank0)} & m=$!; "
            f"for j in $(seq {MPI_STEP_TIMEOUT * 5}); do grep -q '^pingpong size=65536 ' {out} && break; "
            f"kill -0 $m 2>/dev/null || break; sleep 0.2; done; "
            f"mr=$(ps -o pid= --ppid $m); p=$(ps -o pid=,comm= --ppid ${{mr:-0}} | awk '$2 == \"mpi_pingpong\" {{print $1}}'); "
            f"echo \"# killed rank 0 pid ${{p:-none}}\"; [ -n \"$p\" ] && kill -KILL $p; t0=$(date +%s%N); "
            f"wait $m; r=$?; ms=$(( ($(date +%s%N) - t0) / 1000000 )); echo \"# mpirun rc=$r $ms ms after the kill\"; "
            f"left() {{ l=; for e in /proc/[0-9]*/environ; do grep -qz '^UROCE_MPI_AGENT_PORT=' $e 2>/dev/null && "
            f"d=${{e%/environ}} && l=\"$l ${{d#/proc/}}($(cat $d/comm 2>/dev/null))\"; done; echo \"$l\"; }}; "
            f"while :; do l=$(left); g=$(( ($(date +%s%N) - t0) / 1000000 )); "
            f"[ -z \"$l\" ] || [ $g -gt {MPI_KILL_S * 1000} ] && break; sleep 0.2; done; "
            f"echo \"# left:${{l:- none}} $g ms after the kill\"; "
            f"python3 -c \"import sys; sys.path.insert(0, '{HERE}'); import capture; "
            f"print('# capture: dropped', capture.drop_partial_record('{pcap}'), 'bytes of a partial last frame')\"; "
            f"[ -n \"$p\" ] && [ $r != 0 ] && [ $r != 124 ] && [ $ms -le {MPI_KILL_S * 1000} ] && [ -z \"$l\" ])")


def mpi_job_outputs(text: str) -> dict[str, str]:
    """Rank 0's output of each job of an MPI cell (mpi_jobs' lines), by job."""
    parts = re.split(r"^(?:\s*[\d.]+ )?# MPI job (\w+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def ucx_batch(cell: str, side: str, files: str = "/tmp") -> str:
    """sh: write side's ucx_perftest batch of cell (UCX_BATCHES) where verbs_cmd reads it."""
    dev = "rxe0:1" if side == "rxe" else "uroce0:1"
    lines = " ".join(f"'{line.format(dev=dev)}'" for line in UCX_BATCHES[cell])
    return f"printf '%s\\n' {lines} >{files}/{cell}.batch"


def verbs_ids(roles: list[str], cells: list[str]) -> list[str]:
    """The boot's steps in order: <our role>-<cell>."""
    return [f"{r}-{c}" for r in roles for c in cells if r in VERBS_ROLES.get(c, (r,))]


def verbs_guest_script(ids: list[str]) -> str:
    lines = []
    if any(_cell_family(i.split("-", 1)[1]) == "mpi" for i in ids):  # the MPI program, from fw_cfg
        lines.append(f"cat /sys/firmware/qemu_fw_cfg/by_name/opt/uroce/mpi_pingpong/raw >{MPI_GUEST_EXE} && "
                     f"chmod +x {MPI_GUEST_EXE}")
    for i in ids:
        role, c = i.split("-", 1)
        fam = _cell_family(c)
        # rping prints a line per ping: keep the first and last ones on the console
        show = ('if [ $(wc -l </tmp/o) -le 30 ]; then cat /tmp/o; else head -n 5 /tmp/o; echo ...; '
                'tail -n 5 /tmp/o; fi' if fam == "rping" else "cat /tmp/o")
        after = f"{show}; [ $rc = 0 ] || exit $rc; ! grep -q \"invalid data\\|mismatch\" /tmp/o"
        timeout = VERBS_STEP_TIMEOUT
        if fam == "mpi":
            timeout = MPI_STEP_TIMEOUT * len(MPI_JOBS[c])
        if fam == "qperf":  # the server's end: the quit test (0) or its stop by timeout (busybox: 143, coreutils: 124)
            after, timeout = "cat /tmp/o; [ $rc = 0 ] || [ $rc = 143 ] || [ $rc = 124 ] || exit $rc; exit 0", QPERF_SERVE_S
        if fam == "ucx":
            lines.append(ucx_batch(c, "rxe"))
        # a stock rdma_cm client: not before our server's process answers ARP (wait_arp). Not
        # perftest -R: a REQ that then comes before the server listens is rejected, and perftest's
        # client retry after a REJ is broken (VERBS_ROLES); an unanswered REQ resent by the
        # kernel CM 4-6 s later instead finds the server listening.
        first = wait_arp(STACK_IP4) if role == "server" and fam in ("rping", "cma") else ""
        lines.append(guest_step(i, verbs_cmd(c, "rxe", role == "client"), timeout,
                                VERBS_RETRY[fam] if role == "server" else None, after, first))
    lines.append("exit 0")
    return "\n".join(lines)


def cell_mtu(c: str) -> int:
    """The MTU of cell c's link: 9000 for the IPv6 cells (VERBS_V6J), else 1500."""
    return 9000 if c in VERBS_V6J else 1500


def our_port(i: str, base: str) -> str:
    """`uroce run`'s port options of our side of step i: the tap, the capture <base>.pcap and
    the counters <base>.counters; IPv6 and MTU 9000, UCX's device files, loss as the cell has."""
    role, c = i.split("-", 1)
    loss = VERBS_CELLS[c][2]
    port = f"--dev net_af_packet0 --ip {STACK_IP4} --mac {STACK_MAC} --pcap {base}.pcap --counters {base}.counters"
    if c in VERBS_V6J:
        port += f" --ip6 {STACK_IP6} --port-mtu {cell_mtu(c)}"
    if _cell_family(c) in ("ucx", "mpi"):  # the files UCX reads to list a device (docs/MIDDLEWARE.md)
        port += " --device-files"
    if loss:
        seed = 1 + VERBS_SEED_ORDER.index(c) + (100 if role == "client" else 0)
        port += f" --drop-rate {loss} --drop-seed {seed}"
    return port


def verbs_host_cmd(uroce: str, i: str, rdir: str) -> str:
    """`uroce run` of our side of step i on the tap, its capture <rdir>/<i>.pcap, its
    counters <rdir>/<i>.counters (the qperf cell: qperf_runs)."""
    role, c = i.split("-", 1)
    if _cell_family(c) == "qperf":
        return qperf_runs(uroce, i, rdir)
    mtu = cell_mtu(c)
    port = our_port(i, f"{rdir}/{i}")
    if _cell_family(c) == "mpi":  # only rank 0 of the ucx job is ours; mpi_pingpong as run_verbs_matrix built it
        exe = os.path.join(os.path.dirname(rdir), "mpi_pingpong")
        rank0 = f"{shlex.quote(uroce)} run {afp_eal(mtu)} -- {port} {verbs_cmd(c, 'uroce', False, exe)}"
        if c == "mpi_kill":
            return mpi_kill_job(c, rank0, f"{rdir}/{i}.out", f"{rdir}/{i}.pcap")
        return mpi_jobs(c, rank0, exe)
    return (f"timeout {VERBS_STEP_TIMEOUT} {shlex.quote(uroce)} run {afp_eal(mtu)} -- {port} "
            f"{verbs_cmd(c, 'uroce', role == 'server', rdir)}")


def qperf_runs(uroce: str, i: str, rdir: str) -> str:
    """sh (the qperf cell, ours the client): a `uroce run` of the stock qperf client a test of the
    cell's (the last one with qperf's quit test), each tried again alone (retry_loop) while its
    connection fails (VERBS_RETRY: the server not up yet, or a REQ that came before the server's
    listen, QPERF_SERVE_S); test T's output, capture and counters in <rdir>/<i>.T.*. Then each
    test's output, in order, on stdout; the captures joined into <rdir>/<i>.pcap (one pcap header,
    then every test's frames in order: one writer, one header) and the counters summed into
    <rdir>/<i>.counters (engine_thread: the tests whose engine ran a thread). Status: the first
    failing test's."""
    c = i.split("-", 1)[1]
    tests = [w for w in VERBS_CELLS[c][1].split() if w.startswith("rc_")]
    base = [f"{rdir}/{i}.{t}" for t in tests]
    lines = ["r=0"]
    for n, (t, b) in enumerate(zip(tests, base)):
        qperf = f"{verbs_cmd(c, 'uroce', False)} {t}" + (" quit" if n == len(tests) - 1 else "")
        run = f"timeout {VERBS_STEP_TIMEOUT} {shlex.quote(uroce)} run {afp_eal(1500)} -- {our_port(i, b)} {qperf} >{b}.out 2>&1"
        again = f"[ $rc != 0 ] && grep -q {shlex.quote(VERBS_RETRY['qperf'])} {b}.out"
        lines.append(f"{retry_loop(f'{run}; rc=$?; {again}')}; cat {b}.out; [ $r != 0 ] || r=$rc")
    lines.append(f"{{ head -c 24 {base[0]}.pcap; for p in {' '.join(b + '.pcap' for b in base)}; do tail -c +25 $p; done; }}"
                 f" >{rdir}/{i}.pcap")
    lines.append(f"cat {' '.join(b + '.counters' for b in base)} | awk '{{s[$1] += $2}} END {{for (k in s) print k, s[k]}}'"
                 f" >{rdir}/{i}.counters")
    return "(" + "; ".join(lines) + "; exit $r)"


def verbs_host_script(uroce: str, ids: list[str], rdir: str) -> str:
    """Our side, step by step in the guest's order; as the client it retries (a new process
    each time) while the stock server in the guest is not listening yet."""
    lines = ["set -u"]
    for i in ids:
        role, c = i.split("-", 1)
        out = f"{rdir}/{i}.out"
        run = f"{verbs_host_cmd(uroce, i, rdir)} >{out} 2>&1; rc=$?"
        if role == "client" and VERBS_RETRY[_cell_family(c)] and _cell_family(c) != "qperf":  # qperf_runs: its own
            run = retry_loop(f"{run}; [ $rc != 0 ] && grep -q '{VERBS_RETRY[_cell_family(c)]}' {out}")
        if _cell_family(c) == "ucx":
            run = f"{ucx_batch(c, 'uroce', rdir)}; {run}"
        lines += host_step(i, f"{run}; if [ $(wc -l <{out}) -le 40 ]; then cat {out}; "
                              f"else head -n 20 {out}; echo ...; tail -n 10 {out}; fi")
    return "\n".join(lines)


def verbs_output_ok(c: str, text: str, server: bool) -> bool:
    """One side's own success output: pingpong's iteration line, perftest's result row (the
    write/read/atomic_bw server prints the client's; the read/atomic_lat server none: its
    remote address block), with -R also "Data ex. method : rdma_cm", rping's last ping (-v
    prints each), ucmatose's and udaddy's "data transfers complete" and "return status 0". Only
    the last try counts (a stock client tried again while our server was not yet listening)."""
    tool, flags, _ = VERBS_CELLS[c]
    fam = _cell_family(c)
    text = last_try(text)
    if "invalid data" in text or "mismatch" in text:
        return False
    if fam == "rping":
        pings = int(re.search(r"-C (\d+)", flags).group(1))
        return re.search(rf"ping data: rdma-ping-{pings - 1}: ", text) is not None
    if fam == "cma":
        return "data transfers complete" in text and "return status 0" in text
    if fam == "fi":  # a row per default size, in order: "bytes #sent #ack ...", every send acknowledged
        n = re.search(r"-I (\d+)", flags).group(1)   # (the logs stamp each line with the time)
        rows = r"(?ms)" + r".*".join(rf"^\s*(?:\d+\.\d+\s+)?{sz}\s+{n}\s+={n}\s" for sz in FI_SIZES)
        return re.search(rows, text) is not None and not re.search(r"error", text, re.I)
    if fam == "ucx":  # the client: a Final line of figures per test of the batch; no UCX error either side
        if re.search(r" ERROR |Fatal|Segmentation|Assertion", text):
            return False
        return server or len(UCX_FINAL.findall(text)) == len(UCX_BATCHES[c])
    if fam == "mpi":  # the guest's side: an orted a job, started by mpi_agent.sh, and no error;
        if server:    # ours: rank 0's output, every job's run passed
            return (not re.search(r" ERROR |Fatal|Segmentation|rror:", text) and (c != "mpi_kill" or "orted rc=" in text)
                    and len(re.findall(r"^(?:\s*[\d.]+ )?mpi_agent.sh: starting orted on ", text, re.M)) == len(MPI_JOBS[c]))
        if c == "mpi_kill":  # mpi_kill_job's lines, and mpirun's word on rank 0
            m = re.search(r"^# mpirun rc=(\d+) (\d+) ms after the kill$", text, re.M)
            return (re.search(r"^# killed rank 0 pid \d+$", text, re.M) is not None and m is not None
                    and int(m.group(1)) not in (0, 124) and int(m.group(2)) <= MPI_KILL_S * 1000
                    and re.search(r"^# left: none \d+ ms after the kill$", text, re.M) is not None
                    and re.search(r"rank 0 with PID \d+ on node \S+ exited on signal 9", text) is not None)
        jobs = mpi_job_outputs(text)
        return all(run_ok(jobs.get(j, ""), MPI_SIZES) for j in MPI_JOBS[c])
    if fam == "qperf":  # the client: each test's figure ("rc_lat:" then "latency = 9.5 us"); the server: no error
        if server:
            return not re.search(r"error|fail|unexpected", text, re.I)
        return all(re.search(rf"{t}:\s*\n\s*(?:\d+\.\d+\s+)?(latency|bw)\s+=\s+[\d.]+ \S+", text)
                   for t in flags.split() if t.startswith("rc_"))
    if fam == "ibv":
        return re.search(r"\d+ iters in [\d.]+ seconds", text) is not None
    if fam == "ibR" and "Data ex. method : rdma_cm" not in text:
        return False
    if server and tool in VERBS_SERVER_NO_ROW:
        return re.search(r"remote address: LID .*\n.*GID: .*\n.*-{80}", text) is not None
    return bool(perf_rows(text))


def verbs_seed_buffer(sample: bytes, index: int, n: int, lo: int, hi: int) -> bytes | None:
    """The buffer perftest filled after srand(t) for the t in lo..hi whose rand() stream holds
    sample at index (verify_data: every perftest fills its buffer so, but write_lat)."""
    seed = verify_data.find_seed(sample[:16], index, range(hi, lo - 1, -1))
    return None if seed is None else verify_data.glibc_rand_bytes(seed, n)


def verbs_data_check(c: str, role: str, our_frames: list[dict], guest_frames: list[dict],
                     lo: int, hi: int) -> dict:
    """A perftest loss cell's data, on the wire: every payload that reached the destination (our
    capture where we receive, the guest's capture where rxe receives) must equal the sender's
    perftest buffer, found by its srand(time) seed, and every packet of every message must have
    arrived. WRITE: the client's area 0 at the address its RETH names; READ: the server's area
    q=1; SEND (one buffer, no RETH, the same bytes each message): packet k of a message is
    bytes k*MTU.. of area 0."""
    tool, flags, _ = VERBS_CELLS[c]
    size = int(re.search(r"-s (\d+)", flags).group(1))
    iters = int(re.search(r"-n (\d+)", flags).group(1))
    test = tool[3:]
    # the sender: write/send the client, read the server; which of us is it?
    sender_ours = (role == "client") == (test != "read_bw")
    src, dst = (STACK_IP4, GUEST_IP4) if sender_ours else (GUEST_IP4, STACK_IP4)
    qpns = {f["qpn"] for f in our_frames if f["src"] == STACK_IP4}  # the guest's QPN of this cell
    arrived = ([f for f in guest_frames if f["src"] == STACK_IP4 and f["qpn"] in qpns] if sender_ours
               else [f for f in our_frames if f["src"] == GUEST_IP4])
    off = verify_data.slot_bytes(size) if test == "read_bw" else 0
    n = off + verify_data.written_offsets(size, iters)[-1] + size
    if test == "write_bw":
        data = [f for f in arrived if verify_data.WRITE_FIRST <= f["op"] <= verify_data.WRITE_ONLY_IMM]
        reqs = [f for f in data if "va" in f]
    elif test == "read_bw":  # the client's READ requests, as our capture holds them (sent or received)
        data = [f for f in arrived if verify_data.READ_RESP_FIRST <= f["op"] <= verify_data.READ_RESP_ONLY]
        reqs = list({f["psn"]: f for f in our_frames if f["src"] == dst and f["op"] == verify_data.READ_REQ}.values())
    else:
        data = [f for f in arrived if verify_data.SEND_FIRST <= f["op"] <= verify_data.SEND_ONLY_IMM]
        reqs = []
    if not data:
        return {"ok": False, "why": "no data frames in the capture"}
    # The seed: from the first packet of a message that arrived (its bytes start at a known index).
    if reqs:
        base = min(f["va"] for f in reqs)
        starts = [(r_["psn"], off + r_["va"] - base) for r_ in sorted(reqs, key=lambda f: f["va"])]
    else:
        starts = [(f["psn"], 0) for f in data if f["op"] in (verify_data.SEND_FIRST, verify_data.SEND_ONLY,
                                                             verify_data.SEND_ONLY_IMM)]
    by_psn = {f["psn"]: f for f in data}
    start = next(((by_psn[p], k) for p, k in starts if p in by_psn), None)
    if start is None:
        return {"ok": False, "why": "no message's first packet arrived"}
    buf = verbs_seed_buffer(start[0]["payload"], start[1], n, lo, hi)
    if buf is None:
        return {"ok": False, "why": f"no srand(t) seed in {lo}..{hi} gives a first payload"}
    if test != "send_bw":
        r = verify_data.check_wire(buf, off, reqs, data, size, iters)
    else:
        mtu = max(len(f["payload"]) for f in data)
        per_msg = -(-size // mtu)
        anchor = start[0]["psn"]   # a message's first PSN; the run's first is a whole number of messages before
        first = (anchor + min(verify_data._psn_diff(f["psn"], anchor) for f in data) // per_msg * per_msg) \
            % verify_data.PSN_MOD
        bad = 0
        for f in data:
            k = (f["psn"] - first) % verify_data.PSN_MOD % per_msg
            bad += f["payload"] != buf[k * mtu:k * mtu + len(f["payload"])]
        psns = {(f["psn"] - first) % verify_data.PSN_MOD for f in data}
        missing = sum(1 for p in range(iters * per_msg) if p not in psns)
        r = {"ok": bad == 0 and missing == 0, "bytes": sum(len(f["payload"]) for f in data),
             "messages": iters, "frames": len(data),
             "why": f"{bad} payloads differ, {missing} packets never arrived" if bad or missing else ""}
    r["peer_retransmitted"] = verify_data.peer_retransmissions(our_frames, GUEST_IP4)
    r["where"] = "guest capture" if sender_ours else "our capture"
    return r


def run_verbs_matrix(out: str, uroce: str, roles: list[str], cells: list[str],
                     timeout: float = 1200, cache: str | None = None) -> dict:
    """One guest boot (run_cells) for every cell in every role, and one more for the IPv6 jumbo
    cells (VERBS_V6J); per cell also both sides' own
    success output, our counters and, under loss, that frames were lost and resent and, for
    perftest, the data on the wire (verbs_data_check)."""
    res: dict = {"cells": {}, "boots": {}}
    ids = verbs_ids(roles, cells)
    files = ({"mpi_pingpong": mpi_program.build(os.path.join(out, "mpi_pingpong"))}
             if any(_cell_family(c) == "mpi" for c in cells) else None)

    def check(role: str, c: str, cell: dict, ctx: dict) -> None:
        i = f"{role}-{c}"
        tool, flags, loss = VERBS_CELLS[c]
        cpath = os.path.join(ctx["rdir"], f"{i}.counters")
        counters = ({k: int(v) for k, v in (l.split() for l in open(cpath) if l.strip())}
                    if os.path.exists(cpath) else {})
        opath = os.path.join(ctx["rdir"], f"{i}.out")
        our_out = open(opath).read() if os.path.exists(opath) else ""
        stock_ok = verbs_output_ok(c, ctx["stock_out"], role == "client")
        our_ok = verbs_output_ok(c, our_out, role == "server")
        cell.update({"ours": role, "cell": c, "tool": f"{tool} {flags}", "counters": counters,
                     "host_cmd": verbs_host_cmd(uroce, i, ctx["rdir"]),
                     "stock_cmd": verbs_cmd(c, "rxe", role == "client"),
                     "stock_output_ok": stock_ok, "our_output_ok": our_ok,
                     "stock_rows": perf_rows(ctx["stock_out"]), "our_rows": perf_rows(our_out)})
        cell["ok"] = cell["ok"] and stock_ok and our_ok
        if _cell_family(c) == "mpi" and c != "mpi_kill":  # figures by job and size; rank 0's port carried the ucx job
            jobs = mpi_job_outputs(our_out)
            cell["mpi"] = {j: pingpong_lines(t) for j, t in jobs.items()}
            cell["our_rows"] = [mpi_summary(cell["mpi"])]
            sent0 = min_frames(jobs.get("ucx", ""))[0]
            acks = counters.get("ack_sent", 0) > 0
            cell["frames_ok"] = counters.get("sent_pkts", 0) >= sent0 > 0 and acks == ("rc_verbs" in flags)
            cell["ok"] = cell["ok"] and cell["frames_ok"]
        if c in VERBS_V6J:  # every RoCE frame between the two IPv6 addresses, the largest 4096 B
            frames = [f for f in map(verify_data.roce, read_pcap(cell["pcap"])) if f]
            v6 = bool(frames) and all({f["src"], f["dst"]} == {STACK_IP6, GUEST_IP6} for f in frames)
            biggest = max((len(f.get("payload", b"")) for f in frames), default=0)
            cell["path"] = {"frames": len(frames), "ipv6": v6, "largest_payload": biggest}
            cell["ok"] = cell["ok"] and v6 and biggest == 4096
        if loss:
            cell["loss"] = loss
            lost = counters.get("hook_rx_dropped", 0) + counters.get("hook_tx_dropped", 0)
            our_frames = [f for f in map(verify_data.roce, read_pcap(cell["pcap"])) if f]
            resent = counters.get("retransmits", 0) + verify_data.peer_retransmissions(our_frames, GUEST_IP4)
            d: dict = {"lost": lost, "resent": resent, "ok": bool(lost and resent)}
            if not d["ok"]:
                d["why"] = f"no loss or no retransmission seen: {counters}"
            elif tool != "rping":
                guest_frames = [f for f in map(verify_data.roce, read_pcap(ctx["run"]["pcap"], step_window(cell)))
                                if f]
                hs = cell["host_step"]
                d = {**verbs_data_check(c, role, our_frames, guest_frames,
                                        hs.get("epoch_begin", int(time.time())) - 60,
                                        hs.get("epoch_end", int(time.time())) + 60), "lost": lost, "resent": resent}
            else:
                d["how"] = "rping -V: the client compared every ping"
            cell["data"] = d
            cell["ok"] = cell["ok"] and d["ok"]

    # One boot for the cells on an IPv4 1500-byte link, one for those on IPv6 and MTU 9000.
    for boot, group, v6j in (("verbs", [i for i in ids if i.split("-", 1)[1] not in VERBS_V6J], False),
                             ("verbs-ipv6-mtu9000", [i for i in ids if i.split("-", 1)[1] in VERBS_V6J], True)):
        if group:
            run_cells(res, uroce, out, boot, [tuple(i.split("-", 1)) for i in group], verbs_guest_script(group),
                      lambda rdir, g=group: verbs_host_script(uroce, g, rdir), check, timeout=timeout,
                      cache=cache, mtu=9000 if v6j else 1500, ipv6=v6j, files=files)
    res["ok"] = matrix_ok(res)
    return res


def mpi_summary(jobs: dict[str, dict]) -> str:
    """An MPI cell's figures at the smallest and largest size, by job: half round trip, stream."""
    out = []
    for job, pp in jobs.items():
        if pp:
            lo, hi = min(pp), max(pp)
            out.append(f"{job}: {lo} B {pp[lo][0]:.0f} us, {hi} B {pp[hi][1]:.1f} MB/s")
    return "; ".join(out)


def verbs_result(rows: list[str], ok: bool) -> str:
    return ("; ".join(rows[-1:]) or "ok") if ok else "FAIL"


def verbs_table(res: dict) -> str:
    rows = [("cell", "stock tool", "uroce", "guest rc", "uroce rc", "ms (uroce)", "RoCE frames",
             "ICRC bad", "dump --verify", "stock result", "uroce result", "uroce counters", "data",
             "result")]
    for cell in res["cells"].values():
        d = cell.get("data")
        data = "-" if not d else (("ok" if d["ok"] else "FAIL: " + d.get("why", "")) +
                                  (f" ({d['bytes']} B, {d['where']}; rxe resent {d['peer_retransmitted']})"
                                   if d["ok"] and "bytes" in d else f" ({d['how']})" if d["ok"] and "how" in d
                                   else ""))
        rows.append((cell.get("cell", "?"), cell.get("tool", "?") + (f" + {cell['loss']:.0%} loss" if "loss" in cell else ""),
                     cell["ours"], str(cell["guest_step"].get("rc", "-")), str(cell["host_step"].get("rc", "-")),
                     str(cell["host_step"].get("ms", "-")), str(cell["roce_frames"]), str(cell["icrc_bad"]),
                     verify_text(cell["dump_verify_rc"]),
                     verbs_result(cell.get("stock_rows", []), cell.get("stock_output_ok", False)),
                     verbs_result(cell.get("our_rows", []), cell.get("our_output_ok", False)),
                     counters_text(cell.get("counters", {})), data, "PASS" if cell["ok"] else "FAIL"))
    return md_table(rows)
