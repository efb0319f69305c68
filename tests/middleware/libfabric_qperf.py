"""tests/middleware: unmodified libfabric (libfabric-bin 1.17: fi_info,
fi_pingpong) and qperf 0.4.11, Debian 12's binaries, on uroce's
libibverbs.so.1 and librdmacm.so.1 under `uroce run` (docs/MIDDLEWARE.md).
Checks:
  * `fi_info -p verbs` lists uroce0 with the msg endpoint (FI_EP_MSG) and,
    through ofi_rxm, the rdm endpoint ("verbs;ofi_rxm", FI_EP_RDM), on a link
    whose network type is Ethernet;
  * fi_pingpong -c (each receive checked against the sender's pattern),
    `-p verbs -e msg` and `-p "verbs;ofi_rxm" -e rdm`, two processes on a
    net_memif link: fi_pingpong's six sizes, 64 B to 1 MiB, on both ends;
    the rdm pair again with each end on a veth end (net_af_packet) in a
    network namespace;
  * qperf -cm1, rc_lat rc_bw rc_rdma_write_lat rc_rdma_write_bw
    rc_rdma_read_lat rc_rdma_read_bw: each ends with qperf's own figure and
    no error. qperf's rdma_cm side connects to the address its TCP control
    connection used, so both run in a network namespace whose loopback holds
    the server's uroce address (a REQ that meets qperf 0.4.11's own race,
    port sent before listen, is run again);
  * qperf without rdma_cm (every rc test without -cm1, and uc and ud, which
    qperf never runs over rdma_cm) addresses the peer by LID alone, with no
    GRH, which no RoCE device takes: uroce refuses it with EINVAL as the
    kernel does, qperf says so and both ends exit (where the client prints
    the server's message empty, qperf 0.4.11's own race, the server's log
    must hold it);
  * fi_pingpong whose client is killed (SIGKILL, by PID) mid-run: the server
    ends with an error within a bound (the RC retries: 8 ACK timeouts of
    2.1 s) if it had a request unacknowledged; if the kill came after the
    client had acknowledged all the server sent (its pong) and before its
    next ping, RC has nothing to time out and the server waits for its
    receive: then its QP (`uroce stat`) must be in RTS with no WQE
    outstanding. Nothing is left: no process of the cell, no memif socket.
Usage: libfabric_qperf.py UROCE_BIN LIBIBVERBS_SO LIBRDMACM_SO
"""
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "verbs"))
import stock_tools as st  # noqa: E402  (reads argv[1:3]; run_pair, port, ENDS, check)

harness = st.harness
SERVER_IP = st.ENDS["server"][0]
# fi_pingpong's default sizes, as it prints them, each on both ends.
SIZES = ["64", "256", "1k", "4k", "64k", "1m"]
ITERS = 20
PINGPONG_OK = r"(?ms)" + r".*".join(rf"^{s}\s+{ITERS}\s+={ITERS}\s" for s in SIZES)
QPERF_CM = ["rc_lat", "rc_bw", "rc_rdma_write_lat", "rc_rdma_write_bw", "rc_rdma_read_lat", "rc_rdma_read_bw"]
# qperf without rdma_cm: (test, what qperf prints when the device refuses its LID-only address).
QPERF_NO_CM = ([(t, "failed to modify QP to RTR") for t in QPERF_CM + ["uc_lat"]]
               + [(t, "failed to create address handle: Invalid argument") for t in ("ud_lat", "ud_bw")])
# Out-of-band TCP ports: fi_pingpong's control port, qperf's listen port.
BASE_PORT = 24500 + (os.getpid() % 100) * 20


def fi_info():
    """fi_info on a port that needs no peer: the endpoints listed for uroce0,
    and the network type of its link (fi_info -v)."""
    argv = st.RUN + ["--dev", "net_null0", "--ip", SERVER_IP, "fi_info", "-p", "verbs"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    # One block per endpoint: provider, fabric, domain, version, type, protocol.
    seen = set(re.findall(r"^provider: (\S+)\n\s+fabric: \S+\n\s+domain: (\S+)\n.*\n\s+type: (FI_EP_\w+)", out, re.M))
    for want in [("verbs", "uroce0", "FI_EP_MSG"), ("verbs;ofi_rxm", "uroce0", "FI_EP_RDM")]:
        st.check(want in seen, f"fi_info -p verbs: provider {want[0]}, domain {want[1]}, {want[2]}")
    if len(seen) < 2:
        print(out[-1500:])
    out = subprocess.run(argv + ["-v"], capture_output=True, text=True, timeout=60).stdout
    nets = set(re.findall(r"^\s+network_type: (\S+)", out, re.M))
    st.check(nets == {"Ethernet"}, f"fi_info -v: the link's network type is {nets}")


def pingpong(d, name, prov, ep, tcp_port):
    """fi_pingpong -c between two processes on st.LINK; the client reaches
    the server's control port on 127.0.0.1 and learns its fabric address
    there (fi_getname: the server's uroce address)."""
    cd = st.cell_dir(d, name)
    argv = ["fi_pingpong", "-p", prov, "-e", ep, "-c", "-I", str(ITERS)]
    st.run_pair(cd, name, st.stock(cd, "server", argv + ["-B", str(tcp_port)]),
                st.stock(cd, "client", argv + ["-P", str(tcp_port), "127.0.0.1"]), PINGPONG_OK)


def af_packet(d):
    """The rdm pair with each end on its end of a veth pair in a namespace."""
    with harness.netns("mw-afp") as ns:
        harness.VethPair(ns)
        st.LINK = st.AfPacketLink(ns)
        try:
            pingpong(d, "pingpong_rdm_af_packet", "verbs;ofi_rxm", "rdm", BASE_PORT + 2)
        finally:
            st.LINK = st.MemifLink()


def qperf(d):
    """qperf in a namespace whose loopback holds SERVER_IP: its TCP control
    connection and its rdma_cm connection both go to SERVER_IP, the first
    over that loopback, the second over uroce. The qperf server forks a
    child for each test, which opens the device anew: on memif that child
    would have to meet the client's socket, which the client makes only when
    its own first test opens its device, so they race; each end is on its
    end of a veth pair instead (net_af_packet), which needs no meeting. The
    veth ends answer no ARP (the kernel would answer for SERVER_IP on lo)."""
    cd = st.cell_dir(d, "qperf")
    port = str(BASE_PORT + 3)
    with harness.netns("mw-qperf") as ns, harness.procs() as started:
        harness.VethPair(ns)
        for dev in ("va", "vb"):
            harness.sh("ip", "link", "set", dev, "arp", "off", ns=ns)
        harness.sh("ip", "addr", "add", SERVER_IP + "/32", "dev", "lo", ns=ns)
        link = st.AfPacketLink(ns)
        srv = harness.Proc("qperf-server", st.RUN + link.run_args(cd, "server") + ["qperf", "-lp", port], cd, ns=ns)
        started.append(srv)
        time.sleep(1.5)
        client = st.RUN + link.run_args(cd, "client") + ["qperf", SERVER_IP, "-lp", port, "-t", "1"]
        # Debian's qperf 0.4.11 sends its rdma_cm port to the client before it
        # listens (cm_open_server; fixed upstream after 0.4.11 by 118a571
        # "Fix rdmacm race"), so a client whose REQ comes first is rejected
        # (REJ 8, as by any kernel) and stops with "Event rejected", and that
        # server child waits out qperf's timeout. That race, and only it,
        # gets the tests not yet done run again, at most twice.
        figures, todo, out, rc = {}, list(QPERF_CM), "", None
        for attempt in range(3):
            cli = harness.Proc(f"qperf-client-cm{attempt or ''}", client + ["-cm1"] + todo, cd, ns=ns)
            rc = cli.wait(120, stacks=True)
            out = cli.output()
            figures.update((t, f"{k} {v}") for t, k, v in re.findall(r"^(\w+):\n\s+(latency|bw)\s+=\s+([\d.]+ \S+)", out, re.M))
            todo = [t for t in todo if t not in figures]
            if rc == 0 or "unexpected event from RDMA CM: Event rejected" not in out:
                break
            print(f"qperf's own race (its REQ came before the server's rdma_listen): {todo} again")
        for t in QPERF_CM:
            st.check(t in figures, f"qperf -cm1 {t}: {figures.get(t, 'no figure')}")
        st.check(rc == 0 and not re.search(r"error|fail|unexpected", out, re.I), f"qperf -cm1: client rc {rc}, no error")
        if rc != 0:
            print(out[-1500:])
        for t, refusal in QPERF_NO_CM:
            said_before = srv.output().count(refusal)
            cli = harness.Proc(f"qperf-client-{t}", client + [t], cd, ns=ns)
            start = time.monotonic()
            rc = cli.wait(60)
            # refused: qperf's own message and an exit status, not a signal (an abort is a crash)
            ok = rc is not None and rc > 0 and (refusal in cli.output() or server_refused(cli, srv, refusal, said_before))
            st.check(ok, f"qperf {t} without -cm1 (LID, no GRH): refused, '{refusal}', rc {rc} in {time.monotonic() - start:.1f} s")
            if not ok:
                print(cli.output()[-1500:])
        errors = [line for line in srv.output().splitlines() if re.search(r"error|fail|terminate|abort", line, re.I)
                  and not line.startswith(("failed to modify QP to RTR", "failed to create address handle"))]
        st.check(srv.p.poll() is None and not errors, f"qperf server still serving, no other error ({errors[:3]})")


def server_refused(cli, srv, refusal, said_before):
    """Whether the refusal came from qperf's server child and the client
    printed it without its text. The end that fails first prints its message
    and sends it to the other over TCP urgent data; the other prints it after
    "server: ". qperf 0.4.11's client reads that message in its SIGURG handler,
    which races its own blocking read of the control connection: when the
    read takes the message first, the client prints "server: " alone. The
    server child's own copy (its log, written at its exit) then says why."""
    if not re.search(r"^server: $", cli.output(), re.M):
        return False
    deadline = time.monotonic() + 10
    while srv.output().count(refusal) == said_before and time.monotonic() < deadline:
        time.sleep(0.2)
    said = srv.output().count(refusal) > said_before
    print(f"the client printed the server's message empty (qperf's own race); the server's log {'has' if said else 'lacks'} '{refusal}'")
    return said


def cell_processes(d):
    """PIDs of processes whose command line or environment names the cell
    folder d: `uroce run` execs the program, whose command line then lacks
    the port's arguments, but its UROCE_EAL (the memif socket's path) has d."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for what in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as f:
                    if d.encode() in f.read():
                        pids.append(int(pid))
                        break
            except OSError:
                pass
    return pids


def peer_killed(d):
    """fi_pingpong -e msg with iterations for hours: once it runs, the client
    is killed; the server must end with an error within the RC retry bound,
    or (the kill between the client's ACK of a pong and its next ping) wait
    for its receive with nothing outstanding, which its QP's telemetry shows
    (no process of uroce's can send a DREQ once it is killed, where a kernel
    provider's cleanup would: docs/MIDDLEWARE.md)."""
    cd = st.cell_dir(d, "pingpong_peer_killed")
    argv = ["fi_pingpong", "-p", "verbs", "-e", "msg", "-S", "64", "-I", "1000000000"]
    port = str(BASE_PORT + 4)
    prefix = f"uroce-mw-killed-{os.getpid()}"  # the server's EAL, for `uroce stat`
    with harness.procs() as started:
        srv = harness.Proc("killed-server", st.RUN + st.stat_eal(prefix) + st.port(cd, "server", *st.ENDS["server"])
                           + argv + ["-B", port], cd)
        started.append(srv)
        time.sleep(1.5)
        cli = harness.Proc("killed-client", st.stock(cd, "client", argv + ["-P", port, "127.0.0.1"]), cd)
        started.append(cli)
        time.sleep(4)  # connected and ping-ponging
        running = srv.p.poll() is None and cli.p.poll() is None
        st.check(running, "fi_pingpong pair running before the kill")
        os.kill(cli.p.pid, signal.SIGKILL)
        cli.p.wait()
        start = time.monotonic()
        try:
            rc = srv.p.wait(timeout=40)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - start
        if rc is None:  # no request of the server's left unacknowledged?
            qps = list((st.stat(prefix) or {}).get("/uroce/qps", {}).values())
            idle = [q for q in qps if q.get("type") == "RC" and q.get("state") == "RTS"
                    and q.get("outstanding_wqes") == 0]
            st.check(len(qps) == 1 and len(idle) == 1,
                     f"client killed after acknowledging all the server sent: the server waits for its "
                     f"receive, its QP {qps}")
            srv.stop()
        else:
            out = srv.output()
            ok = rc != 0 and re.search(r"error", out, re.I) is not None
            st.check(ok, f"client killed: the server ended rc {rc} in {took:.1f} s with "
                         f"'{(re.findall(r'.*error.*', out, re.I) or ['no error'])[-1].strip()}'")
            if not ok:  # a crash: libfabric's psm provider prints the signal and a backtrace, and exits 1
                print(out[-2000:])
    left = cell_processes(cd)
    st.check(not left, f"nothing of the cell is running ({left})")
    st.check(not os.path.exists(os.path.join(cd, "memif.sock")), "the server's memif socket is gone")
    st.remove_stat_eal(prefix)


def main():
    with harness.tempdir("mw-fabric") as d:
        fi_info()
        pingpong(d, "pingpong_msg", "verbs", "msg", BASE_PORT)
        pingpong(d, "pingpong_rdm", "verbs;ofi_rxm", "rdm", BASE_PORT + 1)
        if os.geteuid() == 0:
            af_packet(d)
            qperf(d)
        else:
            print("SKIP: the af_packet and qperf cells need root (network namespaces)")
        peer_killed(d)
    print(f"{len(st.failures)} failed" if st.failures else "all passed")
    return 1 if st.failures else 0


if __name__ == "__main__":
    sys.exit(main())
