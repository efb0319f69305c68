#!/usr/bin/env python3
"""The interop tests' reference peer: Linux Soft-RoCE (rdma_rxe) in a QEMU/TCG guest, on a tap
inside a private network namespace, next to a host-side program (`uroce ...` on DPDK's
net_af_packet PMD, or dpdk-testpmd). The guest's image comes from build_guest.py; this module
boots it, runs the host side next to it, captures what the guest's NIC sends and receives, and
tears everything down. Python 3 standard library only. Run as root.

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
          run_single(...) / run_pair(...): one whole boot, as a result dict.
Guest scripts: plain sh run by the guest after rxe0 is ready; $GID4 (= $GIDX), $GID6,
$GUEST_NAME are set; wrap each tool in `uroce-step NAME cmd...` to get per-step exit codes.
Everything started is stopped by PID (process group of the child we spawned), and only the
namespace this session created is deleted.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_guest  # noqa: E402
from capture import pcap_summary  # noqa: E402

NET4 = "10.70.0"
GUEST_IP4, KERNEL_IP4, STACK_IP4, GUEST_B_IP4 = (f"{NET4}.{i}" for i in (1, 2, 3, 4))
GUEST_IP6, KERNEL_IP6, STACK_IP6, GUEST_B_IP6 = (f"fd00:70::{i}" for i in (1, 2, 3, 4))
GUEST_MAC, GUEST_B_MAC = "52:54:00:70:00:01", "52:54:00:70:00:04"
STACK_MAC = "02:00:00:70:00:03"
TAP = "uxtap0"


_sessions: list["Session"] = []


def close_sessions() -> None:
    """Close every Session still open (a CLI's last word, whatever ended it)."""
    for s in list(_sessions):
        s.close()


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


# A guest NIC that stops sending for good. Seen twice on 2026-12-05 (QEMU 7.2, TCG, virtio-net on
# the tap): in the middle of a burst the guest's transmit queue was never serviced again; no frame
# left the guest after that, not even an ARP reply, and minutes later its kernel logged "NETDEV
# WATCHDOG: transmit queue 0 timed out"; every later step of the boot failed. NicWatch reads the
# tap's count of frames from the guest every NIC_POLL_S while the guest's steps run. Once it has
# not moved for NIC_QUIET_S the namespace's kernel pings the guest at each poll (only then: a
# frame on the tap draws from the drop hook's random sequence of a loss cell); once it has not
# moved for NIC_STALL_S the boot is stopped, and run_cells boots it again (docs/INTEROP.md).
NIC_POLL_S = 2
NIC_QUIET_S = 20
NIC_STALL_S = 60


class NicWatch:
    """Watches the frames the guest sends while it runs; stops the guest (its process group, by
    PID) once none has come for NIC_STALL_S, pings from NIC_QUIET_S on included."""

    def __init__(self, session: "Session", guest: Guest):
        self.session, self.guest = session, guest
        self.stalled_at: float | None = None  # the guest's time (s) when it was stopped
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _frames(self) -> str:
        return self.session.nsrun(["cat", f"/sys/class/net/{TAP}/statistics/rx_packets"], check=False).stdout

    def _run(self) -> None:
        ping = self.session.nsargv(["ping", "-q", "-c", "1", "-W", str(NIC_POLL_S), GUEST_IP4])
        frames, moved = self._frames(), time.monotonic()
        while not self.done.wait(NIC_POLL_S) and self.guest.proc.p.poll() is None:
            now_frames = self._frames()
            if now_frames != frames:
                frames, moved = now_frames, time.monotonic()
                continue
            quiet = time.monotonic() - moved
            if quiet >= NIC_STALL_S and self.guest.proc.p.poll() is None:
                self.stalled_at = round(self.guest.proc.elapsed, 1)
                log(f"guest {self.guest.name}: no frame from it for {quiet:.0f} s, pings unanswered: "
                    f"its NIC has stalled; stopping it (pid {self.guest.proc.pid})")
                self.guest.proc.stop()
                return
            if quiet >= NIC_QUIET_S:
                subprocess.run(ping, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def close(self) -> float | None:
        """Stops watching; the guest's time of the stall, or None."""
        self.done.set()
        self.thread.join()
        return self.stalled_at


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


# ------------------------------------------------------------------------------ run modes
def run_single(out: str, guest_script: str, host_cmd: str | None = None, *, mtu: int = 1500,
               ipv6: bool = False, testpmd: bool = False, timeout: float = 300,
               nic: str = "virtio-net-pci", host_first_s: float = 1.0,
               cache: str | None = None, files: dict[str, str] | None = None,
               nic_watch: bool = False) -> dict:
    """One guest on the tap + optional host command + optional testpmd; files: as start_guest's.
    nic_watch: a NicWatch while the guest runs (result["guest"]["nic_stall_s"]: when it stopped
    a stalled guest, or None). Returns a result dict."""
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
                          ip6=GUEST_IP6 if ipv6 else None, mtu=mtu, nic=nic, timeout=timeout, files=files)
        res["boot_s"] = round(g.wait_ready(min(timeout, 180)), 2)
        watch = NicWatch(s, g) if nic_watch else None
        g.finish()
        res["guest_s"] = round(time.monotonic() - tq, 2)
        res["guest"] = {"rc": g.rc, "qemu_rc": g.qemu_rc, "steps": g.steps, "info": g.info,
                        "log": g.proc.logpath, "nic_stall_s": watch.close() if watch else None}
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
