"""tests/verbs: unmodified stock binaries (rdma-core's ibverbs-utils, perftest)
on uroce's libibverbs.so.1, under `uroce run`, both ends in two processes on
a net_memif link. Checks:
  * the library exports rdma-core 44's symbol versions, exactly those of the
    system's libibverbs.so.1 (objdump -T of both);
  * `uroce run` sets the variables of the options given and keeps the
    caller's for the others;
  * ibv_devices / ibv_devinfo -v show the device, the port ACTIVE and the GID
    table laid out as Linux lays out a RoCE device's (v1 and v2 per address);
  * each stock pair completes on both ends with its own success output, also
    with -e (completion channels);
  * ibv_rc_pingpong on a RoCEv1 GID sends only what tshark decodes as RoCEv1;
  * ib_write_bw's RoCEv2 frames pass `uroce dump --verify`, and tshark decodes
    each as InfiniBand, none malformed, no expert error.
With --wr-api, only tests/verbs/wr_api.cc's pair instead: the extended CQ and
QP verbs and the ibv_wr_* post API (the verbs_wr_api test).
Usage: stock_tools.py UROCE_BIN LIBIBVERBS_SO [--wr-api WR_API_BIN]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "dpdk"))
import harness  # noqa: E402

UROCE, OURS = sys.argv[1], sys.argv[2]
WR_API = sys.argv[4] if sys.argv[3:4] == ["--wr-api"] else None
SYSTEM = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"
failures = []


def sanitizer_env(lib, leaks):
    """An ASan/UBSan build of the library needs its sanitizer runtimes loaded
    first in binaries not built with them (harness.sanitizer_runtimes). Stock
    binaries exit without freeing what they took (perftest never frees its
    device list), and every allocation of ours has one of their frames above
    it, so leak checks are for our own programs (wr_api, bad_calls), which
    free everything."""
    libs = harness.sanitizer_runtimes(lib)
    if not libs:
        return []
    return ["env", "LD_PRELOAD=" + " ".join(libs)] + ([] if leaks else ["ASAN_OPTIONS=detect_leaks=0"])


SANITIZED = bool(harness.sanitizer_runtimes(OURS))  # CI's ASan + UBSan build of the library
RUN = sanitizer_env(OURS, leaks=False) + [UROCE, "run"]  # `uroce run`, as each stock pair starts
RUN_OURS = sanitizer_env(OURS, leaks=True) + [UROCE, "run"]  # for our own test programs


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def default_versions(lib, prefix="IBVERBS"):
    out = subprocess.run(["objdump", "-T", lib], check=True, capture_output=True, text=True).stdout
    syms = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 2 and "UND" not in line and f[-2].startswith(prefix) and not f[-2].startswith("("):
            syms.add((f[-2], f[-1]))
    return syms


def abi():
    want, got = default_versions(SYSTEM), default_versions(OURS)
    check(want == got, f"symbol versions: {len(got)} exported, {len(want)} in the system's library"
          + (f"; missing {sorted(want - got)[:5]}, extra {sorted(got - want)[:5]}" if want != got else ""))


def port(d, role, ip, mac):
    return ["--dev", f"net_memif0,role={role},socket={d}/memif.sock,socket-abstract=no", "--ip", ip, "--mac", mac]



def devinfo(d):
    argv = RUN + port(d, "server", "10.77.0.1", "02:00:00:77:00:01")
    out = subprocess.run(argv + ["ibv_devices"], capture_output=True, text=True, timeout=60).stdout
    check(re.search(r"^\s+uroce0\s+[0-9a-f]{16}$", out, re.M) is not None, "ibv_devices lists uroce0 with its GUID")
    out = subprocess.run(argv + ["ibv_devinfo", "-v"], capture_output=True, text=True, timeout=60).stdout
    check("PORT_ACTIVE (4)" in out and "link_layer:\t\tEthernet" in out, "ibv_devinfo -v: port ACTIVE, Ethernet")
    gids = dict(re.findall(r"GID\[\s*(\d+)\]:\s+(\S+ RoCE v\d)", out))
    # 02:00:00:77:00:01 as EUI-64: fe80::ff:fe77:1 (RFC 4291 App. A).
    check(gids.get("0") == "fe80:0000:0000:0000:0000:00ff:fe77:0001, RoCE v1"
          and gids.get("1") == "fe80::ff:fe77:1, RoCE v2", f"GID 0/1: link-local, RoCE v1 / v2 ({gids.get('0')}; {gids.get('1')})")
    check(gids.get("3") == "::ffff:10.77.0.1, RoCE v2", f"GID 3: ::ffff:10.77.0.1 RoCE v2 ({gids.get('3')})")
    check(gids.get("2", "").endswith("ffff:0a4d:0001, RoCE v1"), f"GID 2: the IPv4 address as RoCE v1 ({gids.get('2')})")


def run_env():
    """`uroce run` hands COMMAND (here env) the variables of the options
    given and leaves the caller's for the options not given."""
    def seen(extra, argv):
        e = dict(os.environ, UROCE_PORT_MTU="9000", UROCE_PROGRESS="thread", UROCE_DEV="net_null0", **extra)
        out = subprocess.run([UROCE, "run", "--"] + argv + ["env"], env=e, capture_output=True, text=True, timeout=30)
        return dict(line.split("=", 1) for line in out.stdout.splitlines() if line.startswith("UROCE_"))
    v = seen({}, ["--ip", "10.77.0.9"])
    check(v.get("UROCE_PORT_MTU") == "9000" and v.get("UROCE_PROGRESS") == "thread" and v.get("UROCE_DEV") == "net_null0"
          and v.get("UROCE_IP") == "10.77.0.9" and "UROCE_DROP_RATE" not in v,
          f"uroce run keeps the caller's variables of options not given ({v})")
    v = seen({"UROCE_DROP_RATE": "0.5"}, ["--port-mtu", "4200", "--progress", "inline", "--dev", "net_null1", "--drop-rate", "0"])
    check(v.get("UROCE_PORT_MTU") == "4200" and v.get("UROCE_PROGRESS") == "inline" and v.get("UROCE_DEV") == "net_null1"
          and v.get("UROCE_DROP_RATE") == "0", f"uroce run: the options given override the environment ({v})")


ALL_SIZES_ITERS = "10" if SANITIZED else "100"  # perftest -a's -n (below)
# (name, argv, what each end prints on success: one pattern, or the client's and the server's)
PINGPONG_OK = r"\d+ iters in [\d.]+ seconds"
PERF_OK = r"^\s*\d+\s+\d+\s+[\d.]+"
CELLS = [
    ("rc_pingpong", ["ibv_rc_pingpong", "-g", "3"], PINGPONG_OK),
    ("uc_pingpong", ["ibv_uc_pingpong", "-g", "3"], PINGPONG_OK),
    ("ud_pingpong", ["ibv_ud_pingpong", "-g", "3"], PINGPONG_OK),
    ("srq_pingpong", ["ibv_srq_pingpong", "-g", "3"], PINGPONG_OK),
    ("write_bw", ["ib_write_bw", "-x", "3", "-n", "2000"], PERF_OK),
    ("read_bw", ["ib_read_bw", "-x", "3", "-n", "2000"], PERF_OK),
    ("send_bw", ["ib_send_bw", "-x", "3", "-n", "2000"], PERF_OK),
    ("send_bw_uc", ["ib_send_bw", "-x", "3", "-c", "UC", "-n", "2000"], PERF_OK),
    ("send_bw_ud", ["ib_send_bw", "-x", "3", "-c", "UD", "-n", "2000"], PERF_OK),
    ("atomic_bw", ["ib_atomic_bw", "-x", "3", "-n", "2000"], PERF_OK),
    ("write_lat", ["ib_write_lat", "-x", "3", "-n", "1000"], PERF_OK),
    ("send_lat", ["ib_send_lat", "-x", "3", "-n", "1000"], PERF_OK),
    # The passive side of a READ latency test prints no figures, only the addresses.
    ("read_lat", ["ib_read_lat", "-x", "3", "-n", "1000"], (PERF_OK, r"remote address:")),
    # -e: each end sleeps in ibv_get_cq_event on a completion channel between
    # completions (perftest has no -e for WRITE).
    ("rc_pingpong_events", ["ibv_rc_pingpong", "-g", "3", "-e"], PINGPONG_OK),
    ("uc_pingpong_events", ["ibv_uc_pingpong", "-g", "3", "-e"], PINGPONG_OK),
    ("ud_pingpong_events", ["ibv_ud_pingpong", "-g", "3", "-e"], PINGPONG_OK),
    ("srq_pingpong_events", ["ibv_srq_pingpong", "-g", "3", "-e"], PINGPONG_OK),
    ("send_lat_events", ["ib_send_lat", "-x", "3", "-e", "-n", "1000"], PERF_OK),
    ("send_bw_events", ["ib_send_bw", "-x", "3", "-e", "-n", "2000"], PERF_OK),
    ("read_bw_events", ["ib_read_bw", "-x", "3", "-e", "-n", "2000"], PERF_OK),
    # -q 4: four QPs in one test; -b: both ends send at once; -a: every size
    # from 2 B to 8 MB (the last line is the 8 MB one), 100 iterations each, 10
    # under a sanitizer: the same sizes and code, where the 100 took 100 s of
    # the ASan run's 190 (send_lat 66 s, write_bw 34 s).
    ("write_bw_4_qps", ["ib_write_bw", "-x", "3", "-q", "4", "-n", "2000"], PERF_OK),
    ("send_bw_bidirectional", ["ib_send_bw", "-x", "3", "-b", "-n", "2000"], PERF_OK),
    ("write_bw_all_sizes", ["ib_write_bw", "-x", "3", "-a", "-n", ALL_SIZES_ITERS], rf"^\s*8388608\s+{ALL_SIZES_ITERS}\s+[\d.]+"),
    ("send_lat_all_sizes", ["ib_send_lat", "-x", "3", "-a", "-n", ALL_SIZES_ITERS], rf"^\s*8388608\s+{ALL_SIZES_ITERS}\s+[\d.]+"),
]


# Each end's address on the link.
ENDS = {"server": ("10.77.0.1", "02:00:00:77:00:01"), "client": ("10.77.0.2", "02:00:00:77:00:02")}


class MemifLink:
    """The default link: each end a net_memif port on a socket in the cell's
    folder d, EAL with `uroce run`'s defaults."""
    ns = None  # the processes run in the caller's network namespace

    def run_args(self, d, role):
        """What goes between `uroce run` and COMMAND for this end."""
        return port(d, role, *ENDS[role])


class AfPacketLink:
    """Each end a net_af_packet port on its end of a veth pair (va: server,
    vb: client) in network namespace ns; the processes run in it."""
    IFACE = {"server": "va", "client": "vb"}
    EAL = ["--no-huge", "--no-pci", "--no-shconf", "-m", "256", "--log-level=lib.*:error"]

    def __init__(self, ns):
        self.ns = ns

    def run_args(self, d, role):
        ip, mac = ENDS[role]
        return self.EAL + [f"--vdev=net_af_packet0,iface={self.IFACE[role]}", "--",
                           "--dev", "net_af_packet0", "--ip", ip, "--mac", mac]


LINK = MemifLink()  # the link stock() puts both ends on; af_packet.py sets an AfPacketLink


def stock(d, role, argv, run=RUN):
    """A stock binary on uroce's libraries, under `uroce run`, on LINK."""
    return run + LINK.run_args(d, role) + argv


def native(d, role, argv):
    """uroce's own tool (`uroce pingpong`, `uroce perf`) on its own port; each
    end on a core of its own (EAL pins the calling thread to its main lcore)."""
    eal = ["--no-huge", "--no-pci", "--no-shconf", "-m", "256", "-l", "0" if role == "server" else "1",
           "--log-level=lib.*:error", "--"]
    return [UROCE, argv[0]] + eal + port(d, role, *ENDS[role]) + argv[1:]


SERVER_START_S = 1.5  # the wait for a server whose cell names no TCP port to watch
LISTEN_WAIT_S = 30  # the most the client waits for its server to listen before it starts anyway


def listening(pid, port):
    """Whether a TCP socket listens on port in the network namespace of process pid
    (/proc/PID/net/tcp and tcp6: local address in hex, state 0A)."""
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = [line.split() for line in f.readlines()[1:]]
        except OSError:  # the process has ended
            return False
        if any(r[1].endswith(f":{port:04X}") and r[3] == "0A" for r in rows):
            return True
    return False


def wait_listening(srv, tcp_port):
    """Until srv listens on tcp_port, ends, or LISTEN_WAIT_S has passed (SERVER_START_S without a tcp_port)."""
    if tcp_port is None:
        time.sleep(SERVER_START_S)
    else:
        harness.wait_for(lambda: srv.p.poll() is not None or listening(srv.p.pid, tcp_port), LISTEN_WAIT_S)


def run_pair(d, name, srv_argv, cli_argv, ok_re, tcp_port=None):
    """The server, then the client, once: as soon as the server listens on
    tcp_port (the stock tools listen once their device and QPs are up,
    uroce's own before their port waits for its link, which over memif needs
    the client's device), or after SERVER_START_S for a cell without one.
    The stock clients connect their TCP socket once, so a server that is not
    listening by then fails the cell. Both must exit 0 with their success
    output."""
    srv = harness.Proc(name + "-server", srv_argv, d, ns=LINK.ns)
    wait_listening(srv, tcp_port)
    start = time.monotonic()
    cli = harness.Proc(name + "-client", cli_argv, d, ns=LINK.ns)
    rc_c = cli.wait(90)
    rc_s = srv.wait(30)
    oc, os_ = cli.output(), srv.output()
    cli_re, srv_re = ok_re if isinstance(ok_re, tuple) else (ok_re, ok_re)
    good = rc_c == 0 and rc_s == 0 and re.search(cli_re, oc, re.M) and re.search(srv_re, os_, re.M)
    check(bool(good), f"{name}: client rc {rc_c}, server rc {rc_s}, both done {time.monotonic() - start:.1f} s after the client started")
    if not good:
        print(oc[-1500:], "\n---\n", os_[-1500:])
    return oc, os_


def cell_dir(d, name):
    """A folder (and so a memif socket) for each pair: one that fails leaves
    its socket behind, and the next pair must not trip on it."""
    d = os.path.join(d, name)
    os.mkdir(d)
    return d


def pair(d, tcp_port, name, argv, ok_re, cli_port_args=(), run=RUN):
    """Both ends the same stock command, out of band over TCP on 127.0.0.1."""
    d = cell_dir(d, name)
    tcp = ["-p", str(tcp_port)]
    return run_pair(d, name, stock(d, "server", argv + tcp, run),
                    stock(d, "client", list(cli_port_args) + argv + tcp + ["127.0.0.1"], run), ok_re, tcp_port)


# Stock against uroce's own tools, which speak the stock ones' wire and
# out-of-band formats: (name, server, client), each end "stock" or "native"
# with its argv; the client's server argument comes last.
NATIVE_PAIRS = [
    ("rc_pingpong_native_server", ("native", ["pingpong", "-T", "rc", "-n", "500", "-c"]),
     ("stock", ["ibv_rc_pingpong", "-g", "3", "-n", "500", "-c"])),
    ("rc_pingpong_native_client", ("stock", ["ibv_rc_pingpong", "-g", "3", "-n", "500", "-c"]),
     ("native", ["pingpong", "-T", "rc", "-n", "500", "-c"])),
    # -s 1000: a UD message fits the path MTU of a 1500-byte link (1024).
    ("ud_pingpong_native_server", ("native", ["pingpong", "-T", "ud", "-n", "500", "-s", "1000"]),
     ("stock", ["ibv_ud_pingpong", "-g", "3", "-n", "500", "-s", "1000"])),
    ("write_bw_native_server", ("native", ["perf", "write_bw", "-n", "2000"]),
     ("stock", ["ib_write_bw", "-x", "3", "-n", "2000"])),
    ("send_lat_native_client", ("stock", ["ib_send_lat", "-x", "3", "-n", "1000"]),
     ("native", ["perf", "send_lat", "-n", "1000"])),
    ("read_bw_native_client", ("stock", ["ib_read_bw", "-x", "3", "-n", "2000"]),
     ("native", ["perf", "read_bw", "-n", "2000"])),
]


def native_pairs(d, base_port):
    for i, (name, (srv_kind, srv), (cli_kind, cli)) in enumerate(NATIVE_PAIRS):
        cd = cell_dir(d, name)
        tcp = ["-p", str(base_port + i)]
        end = {"stock": stock, "native": native}
        # uroce's tools print the stock ones' result lines.
        run_pair(cd, name, end[srv_kind](cd, "server", srv + tcp), end[cli_kind](cd, "client", cli + tcp + ["127.0.0.1"]),
                 PINGPONG_OK if "pingpong" in name else PERF_OK, base_port + i)


def roce_v1(d, tcp_port):
    """ibv_rc_pingpong on GID index 2 (::ffff:IPv4, RoCE v1): every RoCE frame
    of the client's capture must be what tshark decodes as RoCEv1, ethertype
    0x8915 with a BTH, and none may be RoCEv2 (UDP 4791)."""
    pcap = os.path.join(d, "roce_v1.pcap")
    pair(d, tcp_port, "rc_pingpong_roce_v1", ["ibv_rc_pingpong", "-g", "2"], PINGPONG_OK, ["--pcap", pcap])
    out = subprocess.run(["tshark", "-r", pcap, "-T", "fields", "-e", "eth.type", "-e", "infiniband.bth.opcode",
                          "-e", "udp.dstport"], capture_output=True, text=True, timeout=60).stdout.splitlines()
    rows = [r.split("\t") for r in out]
    v1 = [r for r in rows if r[0] == "0x8915"]
    check(len(v1) >= 2000 and all(r[1] != "" for r in v1), f"RoCEv1: {len(v1)} frames of ethertype 0x8915, each with a BTH by tshark")
    check(not any(len(r) > 2 and r[2] == "4791" for r in rows), "RoCEv1: no RoCEv2 (UDP 4791) frame")


def wire(d, tcp_port):
    """ib_write_bw (RoCEv2) with the client's frames captured: `uroce dump
    --verify` finds every RoCE frame well formed with a good ICRC, and tshark,
    decoding UDP 4791 as InfiniBand, decodes every frame but ARP as InfiniBand
    with a BTH, none malformed and no expert error."""
    pcap = os.path.join(d, "write_bw_wire.pcap")
    pair(d, tcp_port, "write_bw_wire", ["ib_write_bw", "-x", "3", "-s", "4096", "-n", "200"], PERF_OK, ["--pcap", pcap])
    v = subprocess.run([UROCE, "dump", "--verify", pcap], capture_output=True, text=True, timeout=60)
    check(v.returncode == 0, f"uroce dump --verify of the ib_write_bw capture: rc {v.returncode}"
          + ("" if v.returncode == 0 else "\n" + (v.stdout + v.stderr)[-1500:]))
    tshark = ["tshark", "-r", pcap, "-d", "udp.port==4791,infiniband"]
    rows = [r.split("\t") for r in subprocess.run(tshark + ["-T", "fields", "-e", "frame.protocols", "-e", "infiniband.bth.opcode"],
                                                   capture_output=True, text=True, timeout=60).stdout.splitlines()]
    roce = [r for r in rows if not r[0].endswith(":arp")]
    check(len(roce) >= 800 and all(":udp:infiniband" in r[0] and len(r) > 1 and r[1] for r in roce),
          f"tshark: {len(roce)} of {len(rows)} frames are not ARP, each InfiniBand over UDP with a BTH")
    bad = subprocess.run(tshark + ["-Y", "_ws.malformed || _ws.expert.severity >= error"], capture_output=True, text=True,
                         timeout=60).stdout.splitlines()
    check(not bad, f"tshark: no malformed frame, no expert error ({len(bad)}: {bad[:3]})")


def stat_eal(prefix):
    """EAL arguments (and the "--" after them) for an end `uroce stat --file-prefix prefix` reads."""
    return ["--no-huge", "--no-pci", "-m", "256", "--log-level=lib.*:error", f"--file-prefix={prefix}", "--"]


def remove_stat_eal(prefix):
    """Removes the EAL runtime folder of an end started with stat_eal(prefix):
    a program the test stops never runs EAL's cleanup, and its files (3 MB)
    would stay in DPDK's runtime folder for good."""
    base = os.environ.get("RUNTIME_DIRECTORY") or (
        "/var/run" if os.getuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "/tmp"))  # as EAL (and `uroce stat`) find it
    shutil.rmtree(os.path.join(base, "dpdk", prefix), ignore_errors=True)


def stat(prefix):
    """`uroce stat --json` of the process whose EAL has --file-prefix prefix: its telemetry, or None."""
    r = subprocess.run([UROCE, "stat", "--file-prefix", prefix, "--json"], capture_output=True, text=True, timeout=20)
    return json.loads(r.stdout) if r.returncode == 0 else None


def telemetry(d, tcp_port):
    """While a stock ibv_rc_pingpong pair runs, `uroce stat` reads the
    server's DPDK telemetry (/uroce/ports, /uroce/qps, /uroce/counters) as it
    reads uroce's own tools: its port, its RC QP in RTS with the client's QPN,
    and counters that grow. Each end has its own EAL --file-prefix, so each
    has its own telemetry socket."""
    d = cell_dir(d, "telemetry")
    prefix = f"uroce-verbs-tel-{os.getpid()}"
    tcp = ["-p", str(tcp_port)]
    argv = ["ibv_rc_pingpong", "-g", "3", "-n", "5000000"] + tcp  # stopped once read

    def end(role):
        return RUN + stat_eal(f"{prefix}-{role}") + port(d, role, *ENDS[role]) + argv + (["127.0.0.1"] if role == "client" else [])

    srv = harness.Proc("telemetry-server", end("server"), d)
    wait_listening(srv, tcp_port)
    cli = harness.Proc("telemetry-client", end("client"), d)
    snaps = []
    try:
        end_t = time.monotonic() + 30
        while len(snaps) < 2 and time.monotonic() < end_t and srv.p.poll() is None:
            doc = stat(f"{prefix}-server")
            if doc is not None:
                qps = [q for q in doc.get("/uroce/qps", {}).values() if q.get("state") == "RTS"]
                if qps:
                    snaps.append((qps[0], doc))
            time.sleep(0.5)
    finally:
        cli.stop()
        srv.stop()
        for role in ENDS:
            remove_stat_eal(f"{prefix}-{role}")
    got = len(snaps) == 2
    check(got, f"uroce stat on a stock program's telemetry socket: {len(snaps)} snapshots with an RC QP in RTS")
    if got:
        (q0, d0), (q1, d1) = snaps
        sent = [int(x.get("/uroce/counters", {}).get("sent_pkts", 0)) for x in (d0, d1)]
        check(q0.get("type") == "RC" and q0.get("dest_qpn", 0) != 0 and sent[1] > sent[0] > 0,
              f"telemetry: RC QP {q0.get('qpn')} -> dest {q0.get('dest_qpn')}, sent_pkts {sent[0]} then {sent[1]}")
        check(any(p.get("mac") == ENDS["server"][1] for p in d0.get("/uroce/ports", {}).values()),
              f"telemetry: the server's port is {ENDS['server'][1]}")


def wr_api(d, tcp_port):
    """tests/verbs/wr_api.cc on both ends: each prints one ok/FAIL line per
    check and exits non-zero on any FAIL; its lines are shown here."""
    oc, os_ = pair(d, tcp_port, "wr_api", [WR_API], r"^wr_api \w+: \d+ ok, 0 wrong$", run=RUN_OURS)
    for role, out in (("server", os_), ("client", oc)):
        print("\n".join(f"  [{role}] {line}" for line in out.splitlines() if line.startswith(("ok", "FAIL", "wr_api"))))


def main():
    with tempfile.TemporaryDirectory(prefix="uroce-verbs-") as d:
        if WR_API:
            # Clear of the ports below (19500 + (pid % 100) * 40 + i, i < 40).
            wr_api(d, 23500 + os.getpid() % 100)
        else:
            abi()
            run_env()
            devinfo(d)
            for i, (name, argv, ok_re) in enumerate(CELLS):
                pair(d, 19500 + (os.getpid() % 100) * 40 + i, name, argv, ok_re)
            roce_v1(d, 19500 + (os.getpid() % 100) * 40 + len(CELLS))
            wire(d, 19500 + (os.getpid() % 100) * 40 + len(CELLS) + 1)
            native_pairs(d, 19500 + (os.getpid() % 100) * 40 + len(CELLS) + 2)
            telemetry(d, 19500 + (os.getpid() % 100) * 40 + len(CELLS) + 2 + len(NATIVE_PAIRS))
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
