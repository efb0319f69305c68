#!/usr/bin/env python3
"""DPDK telemetry of a running uroce process, read two ways.

Starts uroce-telemetry-demo (two devices on a net_memif link, one RC QP pair,
W RDMA WRITEs of 4 KiB and one 2 KiB READ, all completed) with a file prefix
of its own, then queries it with DPDK's own usertools/dpdk-telemetry.py (the
Debian dpdk package's /usr/bin/dpdk-telemetry.py) and with `uroce stat`, and
checks both against what the transport must show (IBA 9.7.1, 9.7.6.1.1):
  - each 4 KiB WRITE at path MTU 1024 takes 4 PSNs and the READ of 2 KiB
    takes 2 (one per response packet), so the writer's next PSN is its first
    PSN + 4W + 2 modulo 2^24 (it starts at 0xfffff0 and wraps);
  - every request is acknowledged: una_psn == next PSN, nothing outstanding;
  - the responder's expected PSN equals the requester's next PSN and its MSN
    counts the W + 1 messages;
  - both QPs are in RTS; the counters match what the demo counted itself.

Usage: telemetry_test.py DEMO_EXE UROCE_EXE
"""
import json
import os
import subprocess
import sys
import tempfile

TELEMETRY_PY = "/usr/bin/dpdk-telemetry.py"
WRITES = 10


def fail(msg):
    sys.exit("FAIL: " + msg)


def expect(what, got, want):
    if got != want:
        fail("%s: got %r, want %r" % (what, got, want))
    print("ok  %s = %r" % (what, got))


def main():
    demo_exe, uroce_exe = sys.argv[1], sys.argv[2]
    if not os.path.exists(TELEMETRY_PY):
        fail("%s not found: install Debian's dpdk package (.ci/install_deps.sh does)" % TELEMETRY_PY)
    prefix = "uroce-telemetry-%d" % os.getpid()
    tmp = tempfile.mkdtemp(prefix="uroce-telemetry-")
    sock = os.path.join(tmp, "memif.sock")
    demo = subprocess.Popen(
        [demo_exe, "--no-huge", "--no-pci", "--no-shconf", "-m", "256", "-l", "0", "--file-prefix", prefix,
         "--log-level=pmd.net.memif:critical", "--", sock, str(WRITES)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        facts = {}
        for line in demo.stdout:
            line = line.strip()
            if line == "READY":
                break
            if "=" in line and not line.startswith("EAL"):
                k, v = line.split("=", 1)
                facts[k] = int(v)
        else:
            fail("the demo ended before READY (exit %s)" % demo.wait())

        # 1. DPDK's own client, non-interactive: one command per line on stdin, one JSON reply per line.
        cmds = ["/uroce/ports", "/uroce/qps", "/uroce/qp,0,%d" % facts["qpn_a"], "/uroce/counters", "/uroce/cc"]
        out = subprocess.run(["/usr/bin/python3", TELEMETRY_PY, "-f", prefix], input="\n".join(cmds) + "\n",
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30).stdout
        replies = {}
        for line in out.splitlines():
            if line.startswith("{"):
                replies.update(json.loads(line))
        for c in cmds:
            if c.split(",")[0] not in replies:
                fail("dpdk-telemetry.py gave no reply to %s:\n%s" % (c, out))
        print(out)

        ports = replies["/uroce/ports"]
        expect("ports", sorted(ports), ["0", "1"])
        expect("dev 0 gid0", ports["0"]["gid0"], "::ffff:10.0.0.1")
        expect("dev 1 gid0", ports["1"]["gid0"], "::ffff:10.0.0.2")
        expect("dev 0 qps", ports["0"]["qps"], 1)

        qps = replies["/uroce/qps"]
        a, b = qps["0_%d" % facts["qpn_a"]], qps["1_%d" % facts["qpn_b"]]
        next_b = (facts["psn_b"] + 4 * WRITES + 2) & 0xFFFFFF
        expect("A state", a["state"], "RTS")
        expect("B state", b["state"], "RTS")
        expect("A dest_qpn", a["dest_qpn"], facts["qpn_b"])
        expect("B next_psn (first + 4W + 2, wrapped)", b["next_psn"], next_b)
        expect("B sq_psn", b["sq_psn"], next_b)
        expect("B una_psn (all acknowledged)", b["una_psn"], next_b)
        expect("B outstanding_wqes", b["outstanding_wqes"], 0)
        expect("A epsn", a["epsn"], next_b)
        expect("A msn (W + 1 messages)", a["msn"], WRITES + 1)
        expect("A next_psn (sent no request)", a["next_psn"], facts["psn_a"])
        expect("B epsn", b["epsn"], facts["psn_a"])

        qp_a = replies["/uroce/qp"]
        expect("/uroce/qp A qpn", qp_a["qpn"], facts["qpn_a"])
        expect("A per-QP rcvd_pkts (4W + 1 READ request)", qp_a["counters"]["rcvd_pkts"], facts["a_rcvd_pkts"])
        expect("A per-QP rcvd_pkts", facts["a_rcvd_pkts"], 4 * WRITES + 1)
        counters = replies["/uroce/counters"]
        expect("rdma WRITE+READ requests sent (rdma_sends)", counters["rdma_sends"], WRITES + 1)
        expect("every frame sent was received", counters["sent_pkts"], counters["rcvd_pkts"])
        expect("no retransmits", counters["retransmits"], 0)
        cc = replies["/uroce/cc"]
        expect("cc members", sorted(cc), ["0_%d" % facts["qpn_a"], "1_%d" % facts["qpn_b"], "dev0", "dev1"])
        qcc = cc["1_%d" % facts["qpn_b"]]
        expect("cc dev0 algorithm", cc["dev0"]["algorithm"], "dcqcn")
        expect("cc dev0 ecn", cc["dev0"]["ecn"], "ECT(0)")
        expect("cc B algorithm", qcc["algorithm"], "dcqcn")
        # DCQCN (Zhu et al. 2015): a QP is not limited until its first CNP.
        expect("cc B stage before any CNP", qcc["stage"], "idle")
        expect("cc B rate before any CNP is the line rate", qcc["rate_mbps"], cc["dev1"]["line_rate_mbps"])
        if qcc["rtt_samples"] < 1:
            fail("cc B: no RTT sample from %d acknowledged messages" % (WRITES + 1))
        expect("no CNPs in a run without ECN", cc["dev0"]["rcvd_cnp"] + cc["dev1"]["np_cnp_sent"], 0)

        # 2. uroce stat: the same data, as JSON and as tables.
        st = subprocess.run([uroce_exe, "stat", "--file-prefix", prefix, "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=30)
        if st.returncode != 0:
            fail("uroce stat --json: exit %d\n%s" % (st.returncode, st.stdout))
        sj = json.loads(st.stdout)
        for k in ("/uroce/ports", "/uroce/qps", "/uroce/cc"):
            expect("uroce stat --json %s equals dpdk-telemetry.py's" % k, sj[k], replies[k])
        text = subprocess.run([uroce_exe, "stat", "--file-prefix", prefix], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=30)
        print(text.stdout)
        if text.returncode != 0:
            fail("uroce stat: exit %d" % text.returncode)
        row_b = [l.split() for l in text.stdout.splitlines() if l.split()[:4] == ["1", str(facts["qpn_b"]), "RC", "RTS"]]
        if not row_b:
            fail("uroce stat shows no RTS row for dev 1 QP %d" % facts["qpn_b"])
        expect("uroce stat B next_psn column (hex)", row_b[0][7], "0x%06x" % next_b)
        if not any(l.split() == ["rdma_sends", str(WRITES + 1)] for l in text.stdout.splitlines()):
            fail("uroce stat: no counter line 'rdma_sends %d'" % (WRITES + 1))
        bad = subprocess.run([uroce_exe, "stat", "--file-prefix", prefix + "-none"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        expect("uroce stat on a prefix with no process: exit", bad.returncode, 1)
    finally:
        demo.stdin.close()
        try:
            demo.wait(timeout=20)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait()
        subprocess.run(["rm", "-rf", tmp])
        run_dir = "/var/run/dpdk/" + prefix if os.getuid() == 0 else None
        if run_dir:
            subprocess.run(["rm", "-rf", run_dir])
    expect("demo exit", demo.returncode, 0)
    print("telemetry: dpdk-telemetry.py and uroce stat agree with the transport")


if __name__ == "__main__":
    main()
