"""tests/verbs: unmodified rdmacm-utils (rping, ucmatose, udaddy,
rdma_server/rdma_client) and perftest -R on uroce's librdmacm.so.1 and
libibverbs.so.1, under `uroce run`, both ends in two processes on a
net_memif link. Checks:
  * the library exports rdma-core 44's librdmacm symbol versions, exactly
    those of the system's librdmacm.so.1;
  * each stock pair connects through rdma_cm (the IBA CM on QP1, with
    rdma_cm's IP addressing), moves its data and ends with its own success
    output on both ends, rc 0;
  * UROCE_PROGRESS=auto: rping, whose CQ thread polls while its main
    thread posts, ends with the engine on a thread of its own
    (engine_thread 1 in --counters); ibv_rc_pingpong, one thread, without.
Usage: rdmacm_tools.py UROCE_BIN LIBIBVERBS_SO LIBRDMACM_SO
"""
import os
import sys
import tempfile

import stock_tools as st  # noqa: E402  (check, port, symbol tables; reads argv[1:3])

OURS = sys.argv[3]
SYSTEM = "/usr/lib/x86_64-linux-gnu/librdmacm.so.1"
SERVER_IP = "10.77.0.1"

# (name, server argv, client argv, what the client and the server print on success)
CELLS = [
    ("rping", ["rping", "-s", "-v", "-C", "10", "-a", SERVER_IP],
     ["rping", "-c", "-v", "-V", "-C", "10", "-a", SERVER_IP], (r"(?s)(ping data: rdma-ping-\d.*){10}", r"ping data")),
    # -q: rping makes its QP itself and moves it with rdma_init_qp_attr's
    # attributes; the client sends the RTU with rdma_establish.
    ("rping_self_qp", ["rping", "-s", "-q", "-v", "-V", "-C", "10", "-a", SERVER_IP],
     ["rping", "-c", "-q", "-v", "-V", "-C", "10", "-a", SERVER_IP],
     (r"(?s)(ping data: rdma-ping-\d.*){10}", r"(?s)(ping data: rdma-ping-\d.*){10}")),
    # 65535, rping's largest buffer: it refuses 65536 with "Invalid size"
    # and goes on with its default, so that message fails the cell too.
    ("rping_64k", ["rping", "-s", "-S", "65535", "-C", "20", "-a", SERVER_IP],
     ["rping", "-c", "-V", "-S", "65535", "-C", "20", "-a", SERVER_IP],
     (r"\A(?![\s\S]*(mismatch|Invalid size))", r"\A(?![\s\S]*(mismatch|Invalid size))")),
    ("ucmatose", ["ucmatose", "-b", SERVER_IP, "-C", "100"], ["ucmatose", "-s", SERVER_IP, "-C", "100"],
     (r"return status 0", r"return status 0")),
    ("ucmatose_4_conns", ["ucmatose", "-b", SERVER_IP, "-c", "4", "-C", "50"],
     ["ucmatose", "-s", SERVER_IP, "-c", "4", "-C", "50"], (r"return status 0", r"return status 0")),
    # -m: once connected, each end moves its ids (the server its listener
    # too) to a new event channel with rdma_migrate_id and destroys the old
    # one; the sends and the disconnect events then come on the new channel.
    ("ucmatose_migrate", ["ucmatose", "-b", SERVER_IP, "-c", "2", "-C", "50", "-m"],
     ["ucmatose", "-s", SERVER_IP, "-c", "2", "-C", "50", "-m"],
     (r"(?s)migrating to new event channel.*return status 0", r"(?s)migrating to new event channel.*return status 0")),
    ("udaddy", ["udaddy", "-b", SERVER_IP, "-C", "100"], ["udaddy", "-s", SERVER_IP, "-C", "100"],
     (r"return status 0", r"return status 0")),
    ("rdma_server_client", ["rdma_server", "-s", SERVER_IP], ["rdma_client", "-s", SERVER_IP],
     (r"rdma_client: end 0", r"rdma_server: end 0")),
    ("send_lat_rdma_cm", ["ib_send_lat", "-R", "-n", "1000"], ["ib_send_lat", "-R", "-n", "1000", SERVER_IP],
     (st.PERF_OK, st.PERF_OK)),
    ("write_bw_rdma_cm", ["ib_write_bw", "-R", "-n", "2000"], ["ib_write_bw", "-R", "-n", "2000", SERVER_IP],
     (st.PERF_OK, st.PERF_OK)),
    ("read_lat_rdma_cm", ["ib_read_lat", "-R", "-n", "1000"], ["ib_read_lat", "-R", "-n", "1000", SERVER_IP],
     (st.PERF_OK, r"remote address:")),
]


def abi():
    want, got = st.default_versions(SYSTEM, "RDMACM"), st.default_versions(OURS, "RDMACM")
    st.check(want == got, f"librdmacm symbol versions: {len(got)} exported, {len(want)} in the system's library"
             + (f"; missing {sorted(want - got)[:5]}, extra {sorted(got - want)[:5]}" if want != got else ""))


def pair(d, port_no, name, srv_argv, cli_argv, ok_re):
    """Server first (it listens once its device is up), then the client."""
    d = st.cell_dir(d, name)
    # The rdma_cm port, for rdmacm-utils and perftest -R alike; udaddy has
    # none (its -p is the port space) and listens on 7174.
    port_opt = [] if srv_argv[0] == "udaddy" else ["-p", str(port_no)]
    st.run_pair(d, name, st.stock(d, "server", srv_argv + port_opt), st.stock(d, "client", cli_argv[:1] + port_opt + cli_argv[1:]),
                ok_re)


def progress_auto(d, port_no):
    """The automatic progress choice, read from each end's --counters file."""
    cells = [("auto_rping", ["rping", "-s", "-v", "-C", "10", "-a", SERVER_IP, "-p", str(port_no)],
              ["rping", "-c", "-v", "-V", "-C", "10", "-a", SERVER_IP, "-p", str(port_no)],
              (r"(?s)(ping data: rdma-ping-\d.*){10}", r"ping data"), 1),
             ("auto_rc_pingpong", ["ibv_rc_pingpong", "-g", "3", "-n", "200", "-p", str(port_no + 1)],
              ["ibv_rc_pingpong", "-g", "3", "-n", "200", "-p", str(port_no + 1), "127.0.0.1"], st.PINGPONG_OK, 0)]
    for name, srv, cli, ok_re, want in cells:
        cd = st.cell_dir(d, name)
        files = {role: os.path.join(cd, role + ".counters") for role in ("server", "client")}
        # --counters is one more `uroce run` option before COMMAND.
        argv = {role: st.stock(cd, role, ["--counters", files[role]] + a) for role, a in (("server", srv), ("client", cli))}
        st.run_pair(cd, name, argv["server"], argv["client"], ok_re)
        got = {}
        for role, path in files.items():
            lines = dict(l.split() for l in open(path) if l.strip()) if os.path.exists(path) else {}
            got[role] = int(lines.get("engine_thread", -1))
        st.check(got == {"server": want, "client": want},
                 f"{name}: UROCE_PROGRESS=auto chose engine_thread {got} (want {want} on both ends)")


def main():
    abi()
    with tempfile.TemporaryDirectory(prefix="uroce-rdmacm-") as d:
        for i, (name, srv, cli, ok_re) in enumerate(CELLS):
            pair(d, 7000 + (os.getpid() % 100) * 40 + i, name, srv, cli, ok_re)
        progress_auto(d, 7000 + (os.getpid() % 100) * 40 + len(CELLS))
    print(f"{len(st.failures)} failed" if st.failures else "all passed")
    return 1 if st.failures else 0


if __name__ == "__main__":
    sys.exit(main())
