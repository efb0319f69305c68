#!/usr/bin/env python3
"""uroce interop harness: Linux Soft-RoCE (rdma_rxe) reference peers in QEMU, on a tap inside a
private network namespace, next to a host-side program (later: `uroce pingpong` / `uroce perf`
on DPDK's net_af_packet PMD). Python 3 standard library only. Run as root.
Over 800 lines, and knowingly so for now: the session library, the one cell
runner and the three matrices on it (pingpong, perf, verbs) share one CLI
and one set of helpers; the matrices' cell tables are the part to move to
modules of their own next.

Topology of one session (namespace urxe<pid>[x<n>], nothing routed out of it):

    guest A (QEMU/TCG, rxe0 on eth0)  10.70.0.1  fd00:70::1  52:54:00:70:00:01
        |  virtio-net, -netdev tap,ifname=uxtap0,vnet_hdr=off  (+ filter-dump pcap)
    uxtap0 (tap in the namespace)
        kernel of the namespace       10.70.0.2  fd00:70::2   TCP out-of-band (port 18515)
        user-space stack (DPDK)       10.70.0.3  fd00:70::3  02:00:00:70:00:03  (kernel does
                                      not own it: no ARP replies, no ICMP unreachable)
    guest B (pair mode only)          10.70.0.4  fd00:70::4  52:54:00:70:00:04
        A<->B over QEMU's UDP socket netdev on the namespace's own 127.0.0.1

Library:  with Session(out_dir) as s: s.add_tap(); g = s.start_guest(...); s.start_host(...)
CLI:      harness.py {build,boot,pair,smoke,oob-stub,pcap} --help
Guest scripts: plain sh run by the guest after rxe0 is ready; $GID4 (= $GIDX), $GID6,
$GUEST_NAME are set; wrap each tool in `uroce-step NAME cmd...` to get per-step exit codes.
Everything started is stopped by PID (process group of the child we spawned), and only the
namespace this session created is deleted.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_guest  # noqa: E402
import verify_data  # noqa: E402

NET4 = "10.70.0"
GUEST_IP4, KERNEL_IP4, STACK_IP4, GUEST_B_IP4 = (f"{NET4}.{i}" for i in (1, 2, 3, 4))
GUEST_IP6, KERNEL_IP6, STACK_IP6, GUEST_B_IP6 = (f"fd00:70::{i}" for i in (1, 2, 3, 4))
GUEST_MAC, GUEST_B_MAC = "52:54:00:70:00:01", "52:54:00:70:00:04"
STACK_MAC = "02:00:00:70:00:03"
TAP = "uxtap0"
OOB_PORT = 18515
ROCE_PORT = 4791

_sessions: list["Session"] = []


def log(msg: str) -> None:
    print(f"[interop {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def sh(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, **kw)


# ------------------------------------------------------------------------------ processes
class Proc:
    """A child we started: its own process group (pgid == pid), output to a log file,
    killed by that PID/group only. Optional line callback (with host timestamps)."""

    def __init__(self, name: str, argv: list[str], logpath: str, timeout: float,
                 stdin=subprocess.DEVNULL, on_line=None):
        self.name, self.argv, self.logpath, self.timeout = name, argv, logpath, timeout
        self.t0 = time.monotonic()
        self.logf = open(logpath, "w")
        self.p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.p.pid
        self.lines: list[tuple[float, str]] = []
        self.cond = threading.Condition()
        self.on_line = on_line
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.deadline = self.t0 + timeout

    def _read(self) -> None:
        for raw in iter(self.p.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            t = time.monotonic() - self.t0
            self.logf.write(f"{t:8.3f} {line}\n")
            self.logf.flush()
            with self.cond:
                self.lines.append((t, line))
                self.cond.notify_all()
            if self.on_line:
                self.on_line(t, line)
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, pattern: str, timeout: float) -> tuple[float, re.Match] | None:
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        idx = 0
        with self.cond:
            while True:
                while idx < len(self.lines):
                    m = rx.search(self.lines[idx][1])
                    if m:
                        return self.lines[idx][0], m
                    idx += 1
                left = end - time.monotonic()
                if left <= 0 or (self.p.poll() is not None and not self.reader.is_alive()):
                    return None
                self.cond.wait(min(left, 0.2))

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for exit (bounded by the proc's own deadline); kill it if it overruns."""
        end = self.deadline if timeout is None else min(self.deadline, time.monotonic() + timeout)
        try:
            rc = self.p.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            log(f"{self.name}: timed out after {time.monotonic() - self.t0:.1f} s, killing "
                f"pid {self.pid}")
            self.stop()
            rc = None
        self.reader.join(2)
        return rc

    def stop(self, grace: float = 3.0) -> int | None:
        if self.p.poll() is None:
            for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.pid, sig)      # the group led by our own child
                except ProcessLookupError:
                    break
                try:
                    self.p.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.reader.join(2)
        self.logf.close()
        return self.p.returncode

    def text(self) -> str:
        with self.cond:
            return "\n".join(l for _, l in self.lines)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0


# ---------------------------------------------------------------------------------- guest
class Guest:
    """One QEMU/TCG VM running the rxe guest image; parses the /init markers."""

    def __init__(self, proc: Proc, name: str, pcap: str | None):
        self.proc, self.name, self.pcap = proc, name, pcap
        self.ready_s: float | None = None
        self.info: dict[str, str] = {}
        self.rc: int | None = None
        self.qemu_rc: int | None = None
        self.steps: dict[str, dict] = {}

    def wait_ready(self, timeout: float) -> float:
        r = self.proc.wait_for(r"UROCE-READY (.*)|UROCE-FAIL (.*)", timeout)
        if r is None:
            raise HarnessError(f"guest {self.name}: no UROCE-READY within {timeout:.0f} s "
                               f"(log {self.proc.logpath})")
        t, m = r
        if m.group(2) is not None:
            raise HarnessError(f"guest {self.name}: setup failed: {m.group(2)}")
        self.ready_s = t
        self.info = dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv)
        return t

    def finish(self, timeout: float | None = None) -> int | None:
        self.qemu_rc = self.proc.wait(timeout)
        text = self.proc.text()
        m = re.search(r"UROCE-CMD-EXIT rc=(\d+)", text)
        self.rc = int(m.group(1)) if m else None
        for sm in re.finditer(r"UROCE-STEP-END (\S+) rc=(\d+) ms=(\d+)", text):
            self.steps[sm.group(1)] = {"rc": int(sm.group(2)), "ms": int(sm.group(3))}
        return self.rc


class HarnessError(Exception):
    pass


# -------------------------------------------------------------------------------- session
class Session:
    """A private network namespace + the processes started in it. Context manager: on exit
    (normal, exception, SIGTERM/SIGINT/SIGHUP) stops every process it started (by PID) and
    deletes the namespace it created, nothing else."""

    def __init__(self, out_dir: str, cache: str | None = None):
        self.out = os.path.abspath(out_dir)
        os.makedirs(self.out, exist_ok=True)
        self.cache = build_guest.cache_dir(cache)
        self.ns: str | None = None
        self.procs: list[Proc] = []
        self.times: dict[str, float] = {}
        self.t0 = time.monotonic()
        self.image: dict[str, str] | None = None

    # -- lifecycle
    def __enter__(self) -> "Session":
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(s, _on_signal)
        _sessions.append(self)
        base = f"urxe{os.getpid()}"
        existing = set(sh(["ip", "netns", "list"]).stdout.split())
        name = base
        n = 0
        while name in existing:
            n += 1
            name = f"{base}x{n}"
        sh(["ip", "netns", "add", name])
        self.ns = name
        log(f"namespace {name} created")
        self.nsrun(["ip", "link", "set", "lo", "up"])
        # nothing is forwarded or routed anywhere; no IPv6 unless a test asks for it
        for k, v in (("net.ipv4.ip_forward", "0"), ("net.ipv6.conf.all.forwarding", "0"),
                     ("net.ipv6.conf.default.disable_ipv6", "1"),
                     ("net.ipv6.conf.all.disable_ipv6", "1")):
            self.nsrun(["sysctl", "-qw", f"{k}={v}"])
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for p in reversed(self.procs):
            p.stop()
        self.procs.clear()
        if self.ns:
            # DPDK runtime dir of our --file-prefix (left behind when testpmd is killed)
            shutil.rmtree(f"/var/run/dpdk/{self.ns}", ignore_errors=True)
        if self.ns:
            r = sh(["ip", "netns", "del", self.ns], check=False)
            if r.returncode != 0:
                log(f"WARNING: ip netns del {self.ns}: {r.stdout.strip()}")
            else:
                log(f"namespace {self.ns} deleted")
            self.ns = None
        if self in _sessions:
            _sessions.remove(self)

    # -- helpers
    def nsargv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *argv]

    def nsrun(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        return sh(self.nsargv(argv), check=check)

    def ensure_image(self) -> dict[str, str]:
        if self.image is None:
            t = time.monotonic()
            self.image = build_guest.build(self.cache)
            self.times["image_check_s"] = round(time.monotonic() - t, 2)
        return self.image

    def add_tap(self, name: str = TAP, mtu: int = 1500, ipv6: bool = False) -> str:
        """The guest's NIC: a tap in the namespace; the namespace kernel owns .2 only."""
        self.nsrun(["ip", "tuntap", "add", "dev", name, "mode", "tap"])
        self.nsrun(["ip", "link", "set", name, "mtu", str(mtu)])
        if ipv6:
            for k in ("all", "default"):
                self.nsrun(["sysctl", "-qw", f"net.ipv6.conf.{k}.disable_ipv6=0"])
            self.nsrun(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=0"])
            self.nsrun(["sysctl", "-qw", f"net.ipv6.conf.{name}.router_solicitations=0"])
        self.nsrun(["ip", "addr", "add", f"{KERNEL_IP4}/24", "dev", name])
        if ipv6:
            self.nsrun(["ip", "-6", "addr", "add", f"{KERNEL_IP6}/64", "dev", name, "nodad"])
        self.nsrun(["ip", "link", "set", name, "up"])
        return name

    def start(self, name: str, argv: list[str], timeout: float, in_ns: bool = True,
              stdin=subprocess.DEVNULL, on_line=None) -> Proc:
        logpath = os.path.join(self.out, f"{name}.log")
        p = Proc(name, self.nsargv(argv) if in_ns else argv, logpath, timeout, stdin, on_line)
        self.procs.append(p)
        log(f"started {name} pid {p.pid}: {shlex.join(argv)[:200]}")
        return p

    def start_host(self, name: str, command: str, timeout: float) -> Proc:
        """A host-side command inside the namespace (later: uroce pingpong/perf)."""
        env = (f"export UROCE_NS={self.ns} UROCE_TAP={TAP} UROCE_STACK_IP={STACK_IP4} "
               f"UROCE_STACK_IP6={STACK_IP6} UROCE_STACK_MAC={STACK_MAC} "
               f"UROCE_GUEST_IP={GUEST_IP4} UROCE_GUEST_IP6={GUEST_IP6} "
               f"UROCE_OOB_IP={KERNEL_IP4} UROCE_FILE_PREFIX={self.ns}; ")
        return self.start(name, ["timeout", "-k", "5", str(int(timeout)), "bash", "-c",
                                 env + command], timeout + 10)

    def start_guest(self, name: str, script: str, netdev: str, *, ip4: str, mac: str,
                    ip6: str | None = None, mtu: int = 1500, pcap: bool = True,
                    nic: str = "virtio-net-pci", mem: int = 512, timeout: float = 240,
                    poweroff: bool = True, files: dict[str, str] | None = None) -> Guest:
        """files: name -> host path, each readable in the guest as
        /sys/firmware/qemu_fw_cfg/by_name/opt/uroce/<name>/raw (a program to run there)."""
        img = self.ensure_image()
        cmdf = os.path.join(self.out, f"{name}.cmd.sh")
        with open(cmdf, "w") as f:
            f.write(script if script.endswith("\n") else script + "\n")
        append = (f"console=ttyS0 loglevel=4 edd=off panic=-1 uroce_name={name} "
                  f"uroce_ip={ip4}/24 uroce_mtu={mtu} uroce_off={1 if poweroff else 0}")
        if ip6:
            append += f" uroce_ip6={ip6}/64"
        pcap_path = os.path.join(self.out, f"{name}.pcap") if pcap else None
        argv = ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-m", str(mem),
                "-smp", "1", "-nodefaults", "-no-user-config", "-display", "none",
                "-no-reboot", "-monitor", "none", "-serial", "stdio",
                "-kernel", img["kernel"], "-initrd", img["initrd"], "-append", append,
                "-fw_cfg", f"name=opt/uroce/cmd,file={cmdf}",
                *[a for n, path in (files or {}).items() for a in ("-fw_cfg", f"name=opt/uroce/{n},file={path}")],
                "-netdev", netdev, "-device", f"{nic},netdev=n0,mac={mac}"]
        if pcap_path:
            argv += ["-object", f"filter-dump,id=f0,netdev=n0,file={pcap_path}"]
        p = self.start(f"guest-{name}", argv, timeout)
        return Guest(p, name, pcap_path)

    def tap_netdev(self, tap: str = TAP) -> str:
        # vnet_hdr=off: otherwise filter-dump writes frames prefixed by the virtio-net header
        return f"tap,id=n0,ifname={tap},script=no,downscript=no,vnet_hdr=off"

    # -- dpdk-testpmd on the tap (the DPDK attachment path of the stack)
    def start_testpmd(self, iface: str = TAP, timeout: float = 180) -> "TestPmd":
        # stdbuf: testpmd's stdout is a pipe here; line-buffer it so counts arrive live
        argv = ["stdbuf", "-oL", "-eL", "dpdk-testpmd", "--no-huge", "-m", "256", "--no-pci", "--file-prefix", self.ns,
                "-l", "0-1", "--log-level", "lib.eal:warning",
                f"--vdev=net_af_packet0,iface={iface}", "--", "-i", "--total-num-mbufs=2048"]
        p = self.start("testpmd", argv, timeout, stdin=subprocess.PIPE)
        return TestPmd(p)


class TestPmd:
    def __init__(self, proc: Proc):
        self.proc = proc

    def cmd(self, line: str) -> None:
        try:
            self.proc.p.stdin.write((line + "\n").encode())
            self.proc.p.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def start_rx(self, timeout: float = 60) -> None:
        if self.proc.wait_for(r"testpmd>|Port 0: ", timeout) is None:
            raise HarnessError(f"dpdk-testpmd did not start (log {self.proc.logpath})")
        for c in ("set fwd rxonly", "set verbose 1", "start"):
            self.cmd(c)
        if self.proc.wait_for(r"rxonly packet forwarding|Start automatic", 30) is None:
            raise HarnessError(f"dpdk-testpmd: forwarding did not start ({self.proc.logpath})")

    def finish(self) -> dict:
        for c in ("stop", "show port stats all", "quit"):
            self.cmd(c)
        try:
            self.proc.p.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        self.proc.wait(30)
        text = self.proc.text()
        frames = re.findall(r"src=([0-9A-Fa-f:]{17}) - dst=([0-9A-Fa-f:]{17}).*", text)
        udp = [l for l in text.splitlines() if "src=" in l and "L4_UDP" in l]
        m = re.findall(r"RX-packets:\s*(\d+)", text)
        return {"verbose_frames": len(frames), "verbose_udp_frames": len(udp),
                "udp_from": sorted({re.search(r"src=(\S+)", l).group(1).lower() for l in udp}),
                "rx_packets": int(m[-1]) if m else None}


# ------------------------------------------------------------------------------ pcap / RoCE
def read_pcap(path: str):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return
    magic = struct.unpack("<I", data[:4])[0]
    end = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    off = 24
    while off + 16 <= len(data):
        _s, _us, incl, _orig = struct.unpack(end + "IIII", data[off:off + 16])
        off += 16
        yield data[off:off + incl]
        off += incl


def roce_icrc(frame: bytes) -> tuple[int, int] | None:
    """(computed, carried) ICRC of an Ethernet/IPv4|IPv6/UDP:4791 frame, or None."""
    et = struct.unpack("!H", frame[12:14])[0]
    l3 = frame[14:]
    if et == 0x0800:
        ihl = (l3[0] & 0x0F) * 4
        tot = struct.unpack("!H", l3[2:4])[0]
        if l3[9] != 17:
            return None
        ip = bytearray(l3[:ihl])
        ip[1] = 0xFF                 # TOS (DSCP+ECN)
        ip[8] = 0xFF                 # TTL
        ip[10:12] = b"\xff\xff"      # header checksum
        rest = l3[ihl:tot]
    elif et == 0x86DD:
        if l3[6] != 17:
            return None
        plen = struct.unpack("!H", l3[4:6])[0]
        ip = bytearray(l3[:40])
        ip[0] |= 0x0F                # traffic class (low nibble of byte 0 ...)
        ip[1] = 0xFF                 # ... + flow label
        ip[2:4] = b"\xff\xff"
        ip[7] = 0xFF                 # hop limit
        rest = l3[40:40 + plen]
    else:
        return None
    if len(rest) < 8 + 12 + 4 or struct.unpack("!H", rest[2:4])[0] != ROCE_PORT:
        return None
    udp = bytearray(rest[:8])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(rest[8:20])
    bth[4] = 0xFF                    # FECN/BECN/resv6a
    body = rest[20:-4]
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + body) & 0xFFFFFFFF
    carried = struct.unpack("<I", rest[-4:])[0]
    return crc, carried


def oob_messages(path: str) -> list[tuple[str, str, bytes]]:
    """TCP payloads on port 18515 (the ibv_*_pingpong / perftest out-of-band exchange)."""
    msgs = []
    for fr in read_pcap(path):
        if len(fr) < 34 or struct.unpack("!H", fr[12:14])[0] != 0x0800 or fr[23] != 6:
            continue
        ihl = (fr[14] & 0x0F) * 4
        tot = struct.unpack("!H", fr[16:18])[0]
        tcp = fr[14 + ihl:14 + tot]
        sp, dp = struct.unpack("!HH", tcp[:4])
        pay = tcp[(tcp[12] >> 4) * 4:]
        if OOB_PORT in (sp, dp) and pay:
            msgs.append((socket.inet_ntoa(fr[26:30]), socket.inet_ntoa(fr[30:34]), bytes(pay)))
    return msgs


def pcap_summary(path: str) -> dict:
    """Frames, RoCEv2 frames (by BTH opcode), ICRC check, TCP/18515 payload sizes."""
    s = {"frames": 0, "arp": 0, "roce": 0, "icrc_ok": 0, "icrc_bad": 0, "opcodes": {},
         "oob_payloads": [], "macs": set()}
    if not path or not os.path.exists(path):
        return s
    for fr in read_pcap(path):
        s["frames"] += 1
        if len(fr) < 14:
            continue
        s["macs"].add(":".join(f"{b:02x}" for b in fr[6:12]))
        et = struct.unpack("!H", fr[12:14])[0]
        if et == 0x0806:
            s["arp"] += 1
            continue
        r = roce_icrc(fr)
        if r is not None:
            s["roce"] += 1
            s["icrc_ok" if r[0] == r[1] else "icrc_bad"] += 1
            l4 = fr[14 + ((fr[14] & 0x0F) * 4 if et == 0x0800 else 40):]
            op = l4[8]
            s["opcodes"][f"0x{op:02x}"] = s["opcodes"].get(f"0x{op:02x}", 0) + 1
            continue
        if et == 0x0800 and fr[23] == 6:
            ihl = (fr[14] & 0x0F) * 4
            tot = struct.unpack("!H", fr[16:18])[0]
            tcp = fr[14 + ihl:14 + tot]
            sp, dp = struct.unpack("!HH", tcp[:4])
            doff = (tcp[12] >> 4) * 4
            if OOB_PORT in (sp, dp) and len(tcp) > doff:
                s["oob_payloads"].append(len(tcp) - doff)
    s["macs"] = sorted(s["macs"])
    return s


# --------------------------------------------------------------------- fake OOB server stub
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


# ------------------------------------------------------------------------------ run modes
def run_single(out: str, guest_script: str, host_cmd: str | None = None, *, mtu: int = 1500,
               ipv6: bool = False, testpmd: bool = False, timeout: float = 300,
               nic: str = "virtio-net-pci", host_first_s: float = 1.0,
               cache: str | None = None) -> dict:
    """One guest on the tap + optional host command + optional testpmd. Returns a result dict."""
    res: dict = {"mode": "single", "out": os.path.abspath(out)}
    t0 = time.monotonic()
    with Session(out, cache) as s:
        s.ensure_image()
        s.add_tap(mtu=mtu, ipv6=ipv6)
        tp = None
        if testpmd:
            tp = s.start_testpmd(timeout=timeout + 60)
            tp.start_rx()
        host = None
        if host_cmd:
            host = s.start_host("host", host_cmd, timeout)
            time.sleep(host_first_s)
        tq = time.monotonic()
        g = s.start_guest("A", guest_script, s.tap_netdev(), ip4=GUEST_IP4, mac=GUEST_MAC,
                          ip6=GUEST_IP6 if ipv6 else None, mtu=mtu, nic=nic, timeout=timeout)
        res["boot_s"] = round(g.wait_ready(min(timeout, 180)), 2)
        g.finish()
        res["guest_s"] = round(time.monotonic() - tq, 2)
        res["guest"] = {"rc": g.rc, "qemu_rc": g.qemu_rc, "steps": g.steps, "info": g.info,
                        "log": g.proc.logpath}
        if host:
            res["host"] = {"rc": host.wait(15), "log": host.logpath}
        if tp:
            res["testpmd"] = tp.finish()
            res["testpmd"]["log"] = tp.proc.logpath
        res["pcap"] = g.pcap
        res["times"] = s.times
    res["pcap_summary"] = pcap_summary(res["pcap"])
    res["total_s"] = round(time.monotonic() - t0, 2)
    return res


def run_pair(out: str, server_script: str, client_script: str, *, mtu: int = 1500,
             ipv6: bool = False, timeout: float = 300, nic: str = "virtio-net-pci",
             cache: str | None = None) -> dict:
    """Two guests (A server 10.70.0.1, B client 10.70.0.4) over QEMU's UDP socket netdev on
    the namespace's loopback; pcap of A's NIC. $PEER (and $PEER6) = A's address in B."""
    res: dict = {"mode": "pair", "out": os.path.abspath(out)}
    t0 = time.monotonic()
    with Session(out, cache) as s:
        s.ensure_image()
        pa, pb = 20000 + os.getpid() % 20000, 20001 + os.getpid() % 20000
        pre = f"export PEER={GUEST_IP4} PEER6={GUEST_IP6}\n"
        ga = s.start_guest("A", pre + server_script,
                           f"socket,id=n0,udp=127.0.0.1:{pb},localaddr=127.0.0.1:{pa}",
                           ip4=GUEST_IP4, ip6=GUEST_IP6 if ipv6 else None, mac=GUEST_MAC,
                           mtu=mtu, nic=nic, timeout=timeout)
        gb = s.start_guest("B", pre + client_script,
                           f"socket,id=n0,udp=127.0.0.1:{pa},localaddr=127.0.0.1:{pb}",
                           ip4=GUEST_B_IP4, ip6=GUEST_B_IP6 if ipv6 else None, mac=GUEST_B_MAC,
                           mtu=mtu, nic=nic, timeout=timeout, pcap=False)
        res["boot_s"] = {"A": round(ga.wait_ready(min(timeout, 180)), 2),
                         "B": round(gb.wait_ready(min(timeout, 180)), 2)}
        ga.finish()
        gb.finish()
        res["guests"] = {g.name: {"rc": g.rc, "qemu_rc": g.qemu_rc, "steps": g.steps,
                                  "info": g.info, "log": g.proc.logpath} for g in (ga, gb)}
        res["pcap"] = ga.pcap
        res["times"] = s.times
    res["pcap_summary"] = pcap_summary(res["pcap"])
    res["total_s"] = round(time.monotonic() - t0, 2)
    return res


# ----------------------------------------------------------------------------- smoke tests
RETRY = 'for i in $(seq 30); do {cmd} && break; sleep 1; done'


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
        RETRY.format(cmd="ibv_rc_pingpong -g $GIDX -s 1024 -n 5 $PEER") + "'",
        "uroce-step write_bw sh -c '" +
        RETRY.format(cmd="ib_write_bw -d rxe0 -x $GIDX -F -s 8192 -n 50 $PEER") + "'",
    ])
    return run_pair(os.path.join(out, "b-pair"), server, client)


def smoke_testpmd(out: str) -> dict:
    """(c) dpdk-testpmd (net_af_packet on the tap) counts the guest's RoCEv2 frames while the
    guest's ibv_rc_pingpong targets 10.70.0.3 / 02:00:00:70:00:03, which never answers."""
    host = (f"exec python3 {shlex.quote(os.path.abspath(__file__))} oob-stub "
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


# ------------------------------------------------------------- our stack's port on the tap
# net_af_packet's RX ring: the kernel copies every frame of the tap into it and drops the frame
# when the ring is full, silently (DPDK 22.11's PMD does not report those drops). Its default,
# 512 frames of 2048 bytes, holds ~25 ms of what the TCG guest sends in a READ response stream,
# less than our polling process may be descheduled on a loaded 2-core host; 16384 frames hold
# ~1 s. (The frames once thought lost here were lost in the guest's qdisc: guest/init.)
AFP_FRAMES = 16384


def afp_vdev(mtu: int = 1500) -> str:
    """The --vdev of our port on the tap. MTU 9000 (path MTU 4096): ring frames of 8192 bytes
    (the PMD indexes frames at framesz steps, so framesz must divide blocksz)."""
    frame = 2048 if mtu <= 1500 else 8192
    return (f"net_af_packet0,iface=$UROCE_TAP,blocksz={max(frame, 4096)},framesz={frame},"
            f"framecnt={AFP_FRAMES if mtu <= 1500 else AFP_FRAMES // 4}")


# ------------------------------------------------------------- the matrices' shared cell runner
# The pingpong, perf and CM matrices (cm.py) all run the same way: per boot one guest script of
# `uroce-step NAME ...` cells and one host script running our side of the same cells in the same
# order, each between the markers host_step() writes; then per cell the guest step's and the host
# step's exit codes, `uroce dump --verify` and the ICRC check of our capture <out>/<role>-<cell>.pcap,
# plus the matrix's own checks.

def guest_step(name: str, cmd: str, timeout: int, retry_on: str | None = None,
               after: str = "cat /tmp/o; exit $rc") -> str:
    """A `uroce-step` line of a guest batch: cmd under busybox timeout, its output in /tmp/o,
    then `after`. With retry_on: cmd again, up to 90 times 1 s apart, while its output matches
    that grep pattern (a stock client before our server listens)."""
    run = f"timeout {timeout} {cmd} >/tmp/o 2>&1; rc=$?; "
    if retry_on:
        run = f'for i in $(seq 90); do {run}grep -q "{retry_on}" /tmp/o || break; sleep 1; done; '
    return f"uroce-step {name} sh -c '{run}{after}'"


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


def run_cells(res: dict, uroce: str, out: str, boot: str, role: str, cells: list[str], guest_script: str,
              host_script, check=None, **run_opts) -> None:
    """One boot (run_single with run_opts) in <out>/our-<boot>: host_script(rdir) is our side.
    Adds res["boots"][boot] (with the dump --verify of the guest's capture of the whole boot)
    and res["cells"]["<role>/<cell>"]; check(cell, result, ctx) may add fields and clear
    result["ok"], with ctx = {"rdir", "run", "guest_text", "host_text", "stock_out", "our_out"}."""
    rdir = os.path.join(out, f"our-{boot}")
    os.makedirs(rdir, exist_ok=True)
    r = run_single(rdir, guest_script, host_script(rdir), **run_opts)
    host_text = open(r["host"]["log"]).read() if "host" in r else ""
    guest_text = open(r["guest"]["log"]).read() if r["guest"].get("log") else ""
    steps = host_steps(host_text)
    res["boots"][boot] = {"boot_s": r.get("boot_s"), "total_s": r.get("total_s"),
                          "guest_rc": r["guest"]["rc"], "host_rc": r.get("host", {}).get("rc"),
                          "guest_log": r["guest"]["log"], "host_log": r.get("host", {}).get("log"),
                          "guest_pcap": r["pcap"], "guest_pcap_summary": r["pcap_summary"],
                          "guest_dump_verify_rc": dump_verify(uroce, r["pcap"])["rc"]}
    for c in cells:
        pcap = os.path.join(rdir, f"{role}-{c}.pcap")
        g = r["guest"]["steps"].get(c, {})
        hs = steps.get(c, {})
        d = dump_verify(uroce, pcap)
        ps = pcap_summary(pcap)
        cell = {"ours": role, "guest_step": g, "host_step": hs, "dump_verify_rc": d["rc"],
                "roce_frames": ps["roce"], "icrc_bad": ps["icrc_bad"], "opcodes": ps["opcodes"], "pcap": pcap,
                "ok": (g.get("rc") == 0 and hs.get("rc") == 0 and d["rc"] == 0 and ps["roce"] > 0
                       and ps["icrc_bad"] == 0)}
        if d["rc"] != 0:
            cell["dump_tail"] = d["out"][-800:]
        if check:
            check(c, cell, {"rdir": rdir, "run": r, "guest_text": guest_text, "host_text": host_text,
                            # (the name ends at a newline or a space: write_bw is not write_bw_b)
                            "stock_out": _section(guest_text, f"UROCE-STEP-BEGIN {c}\n", f"UROCE-STEP-END {c} "),
                            "our_out": _section(host_text, f"UROCE-HOST-STEP-BEGIN {c} ",
                                                f"UROCE-HOST-STEP-END {c} ")})
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


def preflight(uroce: str | None = None) -> int | None:
    """Exit code if the interop tests cannot run here: 77 (skipped) without root or
    /dev/net/tun, 1 without the uroce binary (if one is named); None if they can."""
    if os.geteuid() != 0:
        print("SKIP: interop tests need root (network namespaces, tap, QEMU)", flush=True)
        return 77
    if not os.path.exists("/dev/net/tun"):
        print("SKIP: /dev/net/tun is missing (no tap devices)", flush=True)
        return 77
    if uroce is not None and not os.access(uroce, os.X_OK):
        print(f"uroce binary {uroce!r} is not executable", file=sys.stderr)
        return 1
    return None


def matrix_args(p: argparse.ArgumentParser, name: str, cells: list[str], default: list[str],
                timeout: float, cells_help: str) -> None:
    """A matrix's options: the ones matrix_main reads."""
    p.add_argument("--uroce", default=os.environ.get("UROCE_BIN", "build/apps/uroce"),
                   help="the uroce binary (default $UROCE_BIN or build/apps/uroce)")
    p.add_argument("--out", default=os.environ.get("UROCE_INTEROP_OUT") or
                   f"/tmp/uroce-interop-{name}-{os.getpid()}")
    p.add_argument("--roles", nargs="+", default=["server", "client"], choices=("server", "client"),
                   help="our roles; one guest boot each")
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


# ------------------------------------------------------------- uroce pingpong interop matrix
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


def pp_guest_script(role: str, cells: list[str]) -> str:
    """The guest's batch: one uroce-step per cell. role = OUR role: 'server' (the stock tool is
    the client and retries until our server listens on 10.70.0.2) or 'client' (the stock tool
    is the server). Fails a step on "invalid data in page" (rdma-core -c prints it and still
    exits 0)."""
    lines = []
    for c in cells:
        cmd = f"ibv_{_pp_tool(c)}_pingpong -g {'$GID6' if c == 'rc6' else '$GID4'} {PP_FLAGS[c]}"
        lines.append(guest_step(c, f"{cmd} {KERNEL_IP4}" if role == "server" else cmd, PP_STEP_TIMEOUT,
                                "Couldn.t connect" if role == "server" else None,
                                'cat /tmp/o; [ $rc = 0 ] || exit $rc; ! grep -q "invalid data" /tmp/o'))
    lines.append("exit 0")
    return "\n".join(lines)


def pp_host_script(uroce: str, role: str, cells: list[str], out: str) -> str:
    """Our side: `uroce pingpong` once per cell, in the guest's order, each with its own EAL
    (--no-shconf) and its own capture, between host_step()'s markers."""
    lines = ["set -u"]
    for c in cells:
        pcap = os.path.join(out, f"{role}-{c}.pcap")
        ours = (f"--ip {STACK_IP4} --mac {STACK_MAC} --timeout {PP_HOST_TIMEOUT} --pcap {pcap} "
                f"--transport {_pp_tool(c)} {PP_FLAGS[c]}")
        if c == "rc6":
            ours += f" --ip6 {STACK_IP6} -g 1"
        ours += f" --listen {KERNEL_IP4}" if role == "server" else f" {GUEST_IP4}"
        eal = ("--no-huge --no-pci --no-shconf -m 256 -l 0 --log-level=lib.*:error "
               f"--vdev={afp_vdev()}")
        lines += host_step(c, f"{shlex.quote(uroce)} pingpong {eal} -- {ours} --counters; rc=$?")
    return "\n".join(lines)


def run_pingpong_matrix(out: str, uroce: str, roles: list[str], cells: list[str],
                        timeout: float = 900, cache: str | None = None) -> dict:
    """Per role one guest boot (IPv6 on when an rc6 cell is asked for) that runs every cell in
    turn (run_cells)."""
    res: dict = {"cells": {}, "boots": {}}

    def name(c: str, cell: dict, _ctx: dict) -> None:
        cell["tool"] = f"ibv_{_pp_tool(c)}_pingpong" + (" (IPv6 GID)" if c == "rc6" else "")

    for role in roles:
        run_cells(res, uroce, out, role, role, cells, pp_guest_script(role, cells),
                  lambda rdir, r_=role: pp_host_script(uroce, r_, cells, rdir), name,
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


# --------------------------------------------------------------- uroce perf interop matrix
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


def perf_guest_script(role: str, cells: list[str]) -> str:
    """The guest's batch, one uroce-step per cell. role = OUR role: 'server' (the stock tool is
    the client and retries until our server listens on 10.70.0.2) or 'client'."""
    lines = []
    for c in cells:
        tool, flags, _ = PERF_CELLS[c]
        cmd = f"{tool} -d rxe0 -x {'$GID6' if c in PERF_IPV6 else '$GID4'} -F {flags}"
        lines.append(guest_step(c, f"{cmd} {KERNEL_IP4}" if role == "server" else cmd, PERF_STEP_TIMEOUT,
                                "Couldn.t connect\\|Unable to init the socket" if role == "server" else None))
    lines.append("exit 0")
    return "\n".join(lines)


def perf_buffer_path(pcap: str) -> str:
    return pcap[:-len(".pcap")] + ".buf"


def perf_host_cmd(uroce: str, role: str, cell: str, pcap: str) -> str:
    _, flags, test = PERF_CELLS[cell]
    mtu = 9000 if cell in PERF_JUMBO else 1500
    eal = ("--no-huge --no-pci --no-shconf -m 256 -l 0 --log-level=lib.*:error "
           f"--vdev={afp_vdev(mtu)}")
    ours = (f"{test} --ip {STACK_IP4} --mac {STACK_MAC} --timeout {PERF_HOST_TIMEOUT} --pcap {pcap} "
            f"--port-mtu {mtu} {flags}")
    if cell in PERF_IPV6:
        ours += f" --ip6 {STACK_IP6} -x 1"
    if cell in PERF_LOSS:
        seed = 1 + sorted(PERF_CELLS).index(cell) + (100 if role == "client" else 0)
        ours += (f" --drop-rate {PERF_LOSS[cell]} --drop-seed {seed} "
                 f"--save-buffer {perf_buffer_path(pcap)}")
    ours += f" --listen {KERNEL_IP4}" if role == "server" else f" {GUEST_IP4}"
    return f"{shlex.quote(uroce)} perf {eal} -- {ours} --counters"


def perf_host_script(uroce: str, role: str, cells: list[str], out: str) -> str:
    """Our side: one `uroce perf` per cell, in the guest's order, each with its own EAL and its
    own capture, between host_step()'s markers."""
    lines = ["set -u"]
    for c in cells:
        lines += host_step(c, perf_host_cmd(uroce, role, c, os.path.join(out, f"{role}-{c}.pcap")) + "; rc=$?")
    return "\n".join(lines)


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
PERF_SHOWN_COUNTERS = (("hook_rx_dropped", "rx lost"), ("hook_tx_dropped", "tx lost"),
                       ("retransmits", "retransmits"), ("local_ack_timeout_err", "timeouts"),
                       ("rcvd_seq_err", "seq NAKs rcvd"), ("implied_nak_seq_err", "implied NAKs"),
                       ("duplicate_request", "dup requests"), ("seq_nak_sent", "seq NAKs sent"),
                       ("read_replayed", "reads replayed"))


def parse_counters(text: str) -> dict[str, int]:
    m = _COUNTERS.findall(text)
    return {k: int(v) for k, v in (kv.split("=", 1) for kv in m[-1].split())} if m else {}


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
    """Per role and link MTU one guest boot (IPv6 on when an IPv6 cell is in it) running every cell
    in turn (run_cells); per cell also both tools' result rows, our counters and, for the loss
    cells, the data check."""
    res: dict = {"cells": {}, "boots": {}}
    groups = [(1500, [c for c in cells if c not in PERF_JUMBO]),
              (9000, [c for c in cells if c in PERF_JUMBO])]  # one boot per role and link MTU
    for role, mtu, group in [(r_, m, g) for r_ in roles for m, g in groups if g]:
        guest_frames: list[dict] | None = None

        def check(c: str, cell: dict, ctx: dict, role_=role) -> None:
            nonlocal guest_frames
            tool, flags, test = PERF_CELLS[c]
            counters = parse_counters(ctx["our_out"])
            cell.update({"tool": f"{tool} {flags}", "test": test, "counters": counters,
                         "host_cmd": perf_host_cmd(uroce, role_, c, cell["pcap"]),
                         "stock_rows": perf_rows(ctx["stock_out"]), "our_rows": perf_rows(ctx["our_out"])})
            if c in PERF_LOSS:
                if guest_frames is None:
                    guest_frames = [f for f in map(verify_data.roce, read_pcap(ctx["run"]["pcap"])) if f]
                cell["loss"] = PERF_LOSS[c]
                cell["data"] = perf_loss_check(role_, c, cell["pcap"], guest_frames, cell["host_step"], counters)
                cell["ok"] = cell["ok"] and cell["data"]["ok"]

        run_cells(res, uroce, out, role if mtu == 1500 else f"{role}-mtu{mtu}", role, group,
                  perf_guest_script(role, group), lambda rdir, r_=role, g_=group: perf_host_script(uroce, r_, g_, rdir),
                  check, mtu=mtu, timeout=timeout, cache=cache, ipv6=bool(PERF_IPV6 & set(group)))
    res["ok"] = matrix_ok(res)
    return res


def counters_text(counters: dict[str, int]) -> str:
    return ", ".join(f"{label} {counters[k]}" for k, label in PERF_SHOWN_COUNTERS
                     if counters.get(k)) or "-"


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


# ------------------------------------------- stock verbs programs on uroce against stock on rxe
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
VERBS_ROLES = {"send_lat_R": ("server",), "write_bw_R": ("server",), "qperf": ("client",)}
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
    # qperf 0.4.11 sends its rdma_cm port before it listens (fixed upstream after 0.4.11, 118a571
    # "Fix rdmacm race"): a REQ that comes first is rejected, and the client runs again
    "qperf": "failed to connect\\|No route to host\\|Event rejected",
    # perftest -R's client gives up at once when its REQ is rejected (the server not up yet)
    "ibR": "REJECTED\\|UNREACHABLE\\|Unable to perform rdma_client"}
VERBS_OUR_GID = 3
FI_PORT = 47592                                      # fi_pingpong's control port (-B / -P)
FI_SIZES = ["64", "256", "1k", "4k", "64k", "1m"]    # fi_pingpong's default sizes, as it prints them
QPERF_PORT = 19766
QPERF_SERVE_S = 100  # the guest's qperf server runs this long, then is stopped (it never ends itself)
# The cells on IPv6 GIDs (rxe's $GID6, our index 5: the IPv6 RoCEv2 entry after the IPv4 pair)
# over a 9000-byte link, path MTU 4096; the out-of-band TCP stays on IPv4.
VERBS_V6J = {c for c in VERBS_CELLS if c.endswith("_6j")}
VERBS_OUR_GID6 = 5
# read/atomic latency: the (non-duplex) server prints no result row; it ends after the
# exchange with the remote address block and a dashes line (perftest's RESULT_LINE)
VERBS_SERVER_NO_ROW = {"ib_read_lat", "ib_atomic_lat"}


def _verbs_family(tool: str, flags: str = "") -> str:
    """ibv (pingpong), ib (perftest over TCP), ibR (perftest -R), rping, cma (ucmatose, udaddy),
    fi (fi_pingpong), qperf."""
    if tool in ("fi_pingpong", "qperf"):
        return "fi" if tool == "fi_pingpong" else "qperf"
    if tool == "rping":
        return "rping"
    if tool in ("ucmatose", "udaddy"):
        return "cma"
    if tool.startswith("ibv_"):
        return "ibv"
    return "ibR" if re.search(r"(^| )-R( |$)", flags) else "ib"


def _cell_family(cell: str) -> str:
    return _verbs_family(*VERBS_CELLS[cell][:2])


def verbs_cmd(cell: str, side: str, server: bool) -> str:
    """The stock command line of one side of a cell: side 'rxe' (the guest) or 'uroce' (ours);
    server: whether that side is the server."""
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
    if fam == "qperf":  # the server serves until the guest's step ends it (QPERF_SERVE_S)
        return f"qperf -lp {QPERF_PORT}" if server else f"qperf {peer_oob} -lp {QPERF_PORT} {flags}"
    dev = "rxe0" if side == "rxe" else "uroce0"
    if fam == "ibR":
        cmd = f"{tool} -d {dev} -F {flags}"
        return cmd if server else f"{cmd} {other}"
    cmd = (f"{tool} -d {dev} -g {gid} {flags}" if fam == "ibv" else f"{tool} -d {dev} -x {gid} -F {flags}")
    return cmd if server else f"{cmd} {peer_oob}"


def verbs_ids(roles: list[str], cells: list[str]) -> list[str]:
    """The boot's steps in order: <our role>-<cell>."""
    return [f"{r}-{c}" for r in roles for c in cells if r in VERBS_ROLES.get(c, (r,))]


def verbs_guest_script(ids: list[str]) -> str:
    lines = []
    for i in ids:
        role, c = i.split("-", 1)
        fam = _cell_family(c)
        # rping prints a line per ping: keep the first and last ones on the console
        show = ('if [ $(wc -l </tmp/o) -le 30 ]; then cat /tmp/o; else head -n 5 /tmp/o; echo ...; '
                'tail -n 5 /tmp/o; fi' if fam == "rping" else "cat /tmp/o")
        after = f"{show}; [ $rc = 0 ] || exit $rc; ! grep -q \"invalid data\\|mismatch\" /tmp/o"
        timeout = VERBS_STEP_TIMEOUT
        if fam == "qperf":  # the server's end is its stop by timeout (busybox: 143, coreutils: 124)
            after, timeout = "cat /tmp/o; [ $rc = 143 ] || [ $rc = 124 ] || exit $rc; exit 0", QPERF_SERVE_S
        lines.append(guest_step(i, verbs_cmd(c, "rxe", role == "client"), timeout,
                                VERBS_RETRY[fam] if role == "server" else None, after))
    lines.append("exit 0")
    return "\n".join(lines)


def verbs_host_cmd(uroce: str, i: str, rdir: str) -> str:
    """`uroce run` of our side of step i on the tap, its capture <rdir>/uroce-<i>.pcap, its
    counters <rdir>/<i>.counters."""
    role, c = i.split("-", 1)
    loss = VERBS_CELLS[c][2]
    mtu = 9000 if c in VERBS_V6J else 1500
    eal = ("--no-huge --no-pci --no-shconf -m 256 -l 0 --log-level=lib.*:error "
           f"--vdev={afp_vdev(mtu)}")
    port = (f"--dev net_af_packet0 --ip {STACK_IP4} --mac {STACK_MAC} --pcap {rdir}/uroce-{i}.pcap "
            f"--counters {rdir}/{i}.counters")
    if c in VERBS_V6J:
        port += f" --ip6 {STACK_IP6} --port-mtu {mtu}"
    if loss:
        seed = 1 + VERBS_SEED_ORDER.index(c) + (100 if role == "client" else 0)
        port += f" --drop-rate {loss} --drop-seed {seed}"
    return (f"timeout {VERBS_STEP_TIMEOUT} {shlex.quote(uroce)} run {eal} -- {port} "
            f"{verbs_cmd(c, 'uroce', role == 'server')}")


def verbs_host_script(uroce: str, ids: list[str], rdir: str) -> str:
    """Our side, step by step in the guest's order; as the client it retries (a new process
    each time) while the stock server in the guest is not listening yet."""
    lines = ["set -u"]
    for i in ids:
        role, c = i.split("-", 1)
        out = f"{rdir}/{i}.out"
        run = f"{verbs_host_cmd(uroce, i, rdir)} >{out} 2>&1; rc=$?"
        if role == "client":
            run = (f"for n in $(seq 90); do {run}; [ $rc = 0 ] && break; "
                   f"grep -q '{VERBS_RETRY[_cell_family(c)]}' {out} || break; sleep 1; done")
        lines += host_step(i, f"{run}; if [ $(wc -l <{out}) -le 40 ]; then cat {out}; "
                              f"else head -n 20 {out}; echo ...; tail -n 10 {out}; fi")
    return "\n".join(lines)


def verbs_output_ok(c: str, text: str, server: bool) -> bool:
    """One side's own success output: pingpong's iteration line, perftest's result row (the
    write/read/atomic_bw server prints the client's; the read/atomic_lat server none: its
    remote address block), with -R also "Data ex. method : rdma_cm", rping's last ping (-v
    prints each), ucmatose's and udaddy's "data transfers complete" and "return status 0"."""
    tool, flags, _ = VERBS_CELLS[c]
    fam = _cell_family(c)
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
                     timeout: float = 900, cache: str | None = None) -> dict:
    """One guest boot (run_cells) for every cell in every role, and one more for the IPv6 jumbo
    cells (VERBS_V6J); per cell also both sides' own
    success output, our counters and, under loss, that frames were lost and resent and, for
    perftest, the data on the wire (verbs_data_check)."""
    res: dict = {"cells": {}, "boots": {}}
    ids = verbs_ids(roles, cells)
    guest_frames: dict[str, list[dict]] = {}  # per boot: the RoCE frames of the guest's capture

    def check(i: str, cell: dict, ctx: dict) -> None:
        role, c = i.split("-", 1)
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
                gpcap = ctx["run"]["pcap"]
                if gpcap not in guest_frames:
                    guest_frames[gpcap] = [f for f in map(verify_data.roce, read_pcap(gpcap)) if f]
                hs = cell["host_step"]
                d = {**verbs_data_check(c, role, our_frames, guest_frames[gpcap],
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
            run_cells(res, uroce, out, boot, "uroce", group, verbs_guest_script(group),
                      lambda rdir, g=group: verbs_host_script(uroce, g, rdir), check, timeout=timeout,
                      cache=cache, mtu=9000 if v6j else 1500, ipv6=v6j)
    res["ok"] = matrix_ok(res)
    return res


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


# ------------------------------------------------------------------------------------- CLI
def _script_arg(v: str | None) -> str | None:
    if v and v.startswith("@"):
        return open(v[1:]).read()
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="uroce interop harness (rxe peers in QEMU)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build/refresh the guest image (idempotent)")
    b.add_argument("--force", action="store_true")
    for name, hlp in (("boot", "one guest on the tap + optional host command/testpmd"),
                      ("pair", "two guests rxe<->rxe")):
        p = sub.add_parser(name, help=hlp)
        p.add_argument("--out", default=f"/tmp/uroce-interop-{name}-{os.getpid()}")
        p.add_argument("--mtu", type=int, default=1500, choices=(1500, 9000))
        p.add_argument("--ipv6", action="store_true", help="give the guest(s) fd00:70::N too")
        p.add_argument("--timeout", type=float, default=300)
        p.add_argument("--nic", default="virtio-net-pci", choices=("virtio-net-pci", "e1000"))
        if name == "boot":
            p.add_argument("--guest", required=True, help="guest sh script (or @file)")
            p.add_argument("--host", help="host command (bash) run in the namespace")
            p.add_argument("--testpmd", action="store_true",
                           help="also run dpdk-testpmd (rxonly, verbose) on the tap")
        else:
            p.add_argument("--server", required=True, help="guest A script (or @file)")
            p.add_argument("--client", required=True, help="guest B script (or @file); "
                           "$PEER = A's IPv4")
    sm = sub.add_parser("smoke", help="the smoke checks (meson suite 'interop')")
    sm.add_argument("--out", default=os.environ.get("UROCE_INTEROP_OUT") or
                    f"/tmp/uroce-interop-smoke-{os.getpid()}")
    sm.add_argument("--only", nargs="*", choices=("a", "b", "c"))
    o = sub.add_parser("oob-stub", help="fake ibv_*_pingpong server (52-byte exchange)")
    o.add_argument("--listen", default=KERNEL_IP4)
    o.add_argument("--port", type=int, default=OOB_PORT)
    o.add_argument("--qpn", type=lambda x: int(x, 0), default=0x000123)
    o.add_argument("--psn", type=lambda x: int(x, 0), default=0x000456)
    o.add_argument("--gid-ip", default=STACK_IP4)
    o.add_argument("--count", type=int, default=1)
    o.add_argument("--timeout", type=float, default=120)
    matrix_args(sub.add_parser("pingpong", help="interop matrix: uroce pingpong <-> stock "
                               "ibv_{rc,uc,ud,srq}_pingpong, both roles (meson suite 'interop')"),
                "pingpong", list(PP_TOOLS) + ["rc6"], list(PP_TOOLS) + ["rc6"], 900, "rc6 = rc over IPv6 GIDs")
    matrix_args(sub.add_parser("perf", help="interop matrix: uroce perf <-> stock perftest ib_*_{bw,lat}, "
                               "both roles (meson suite 'interop')"),
                "perf", list(PERF_CELLS), PERF_DEFAULT_CELLS, 1500, "default: all cells")
    matrix_args(sub.add_parser("verbs", help="interop matrix: stock verbs/rdma_cm programs under `uroce run` "
                               "<-> the same on rxe, both roles, one boot (meson suite 'interop')"),
                "verbs", list(VERBS_CELLS), list(VERBS_CELLS), 900, "default: all cells")
    pc = sub.add_parser("pcap", help="summarize a pcap: RoCEv2 opcodes, ICRC check")
    pc.add_argument("--oob", action="store_true", help="also print the TCP/18515 payloads")
    pc.add_argument("files", nargs="+")
    a = ap.parse_args(argv)

    if a.cmd == "build":
        r = build_guest.build(build_guest.cache_dir(), force=a.force)
        print(open(r["manifest"]).read(), end="")
        return 0
    if a.cmd == "oob-stub":
        return oob_stub(a.listen, a.port, a.qpn, a.psn, a.gid_ip, a.count, a.timeout)
    if a.cmd == "pcap":
        bad = 0
        for f in a.files:
            s = pcap_summary(f)
            bad += s["icrc_bad"]
            print(f"{f}: {json.dumps(s, default=list)}")
            if a.oob:
                for src, dst, pay in oob_messages(f):
                    txt = pay.decode("ascii", "replace") if all(
                        32 <= c < 127 or c == 0 for c in pay) else "hex:" + pay.hex()
                    print(f"  {src} -> {dst} {len(pay):4d} B  {txt!r}")
        return 1 if bad else 0
    if a.cmd == "smoke":
        return smoke(a.out, a.only)
    if a.cmd == "pingpong":
        return matrix_main(a, "pingpong", run_pingpong_matrix, pp_table)
    if a.cmd == "perf":
        return matrix_main(a, "perf", run_perf_matrix, perf_table, capture_gb=3)
    if a.cmd == "verbs":
        return matrix_main(a, "verbs", run_verbs_matrix, verbs_table, capture_gb=1)
    if os.geteuid() != 0:
        print("interop harness needs root", file=sys.stderr)
        return 2
    if a.cmd == "boot":
        r = run_single(a.out, _script_arg(a.guest), _script_arg(a.host), mtu=a.mtu,
                       ipv6=a.ipv6, testpmd=a.testpmd, timeout=a.timeout, nic=a.nic)
        rc = r["guest"]["rc"]
    else:
        r = run_pair(a.out, _script_arg(a.server), _script_arg(a.client), mtu=a.mtu,
                     ipv6=a.ipv6, timeout=a.timeout, nic=a.nic)
        rc = max((g["rc"] if g["rc"] is not None else 255) for g in r["guests"].values())
    print(json.dumps(r, indent=1, default=list))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        for _s in list(_sessions):
            _s.close()
