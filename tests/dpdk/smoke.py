#!/usr/bin/env python3
"""tests/dpdk (c): in-process PMDs, no peer needed.

  net_ring, 4 queue pairs: frames loop back on every queue, content and port
      stats checked; pcap capture of queue 0 read back (every frame sent and
      received, monotonic TSC stamps)
  net_ring with external-buffer frames: every external buffer is freed
  net_null, 2 queue pairs: RSS configures, the bursts and stats work
  EAL arguments passed through: net_ring given as --vdev before "--"
  errors: an unknown device and too many queues fail with a clear Status
Usage: smoke.py PATH/uroce-rawport
"""
import os
import sys

import harness

EAL = ["--no-huge", "--no-pci", "--no-shconf", "-m", "256", "--log-level=lib.*:error"]


def run(binary, tag, argv, d, failures, want_rc=0, want_text="result PASS"):
    p = harness.Proc(tag, [binary, *argv], d)
    rc = p.wait(60)
    p.stop()
    out = p.output()
    print(out, end="")
    harness.check(rc == want_rc and want_text in out, f"{tag}: rc={rc} (want {want_rc}), '{want_text}'", failures)
    return out


def main():
    binary = sys.argv[1]
    failures = []
    with harness.tempdir("smoke") as d:
        pcap = os.path.join(d, "ring.pcap")
        out = run(binary, "ring-4q-pcap", ["--", "smoke", "--dev", "net_ring0", "--queues", "4", "--count", "2000",
                                           "--size", "200", "--pcap", pcap, "--xstats"], d, failures)
        harness.check(all(os.path.exists(p) for p in [pcap] + [os.path.join(d, f"ring-q{q}.pcap") for q in (1, 2, 3)]),
                      "ring-4q-pcap: one capture file per queue", failures)
        run(binary, "ring-extbuf", ["--", "smoke", "--dev", "net_ring0", "--count", "3000", "--extbuf"], d, failures)
        out = run(binary, "null-2q-rss", ["--", "smoke", "--dev", "net_null0", "--queues", "2", "--count", "500",
                                          "--mac", "02:00:00:00:00:99"], d, failures)
        harness.check("rss=1" in out and "mac=02:00:00:00:00:99 mac_applied=1" in out,
                      "null-2q-rss: RSS on, our MAC applied", failures)
        out = run(binary, "eal-vdev", [*EAL, "--vdev=net_ring0", "--", "smoke", "--dev", "net_ring0", "--count", "100"],
                  d, failures)
        harness.check("eal=given" in out, "eal-vdev: EAL arguments before -- were used", failures)
        run(binary, "err-unknown", ["--", "smoke", "--dev", "net_nosuchpmd0"], d, failures, want_rc=1,
            want_text="open failed: InvalidArgument: device spec 'net_nosuchpmd0' names no known bus or driver")
        run(binary, "err-queues", ["--", "smoke", "--dev", "net_ring0", "--queues", "64"], d, failures, want_rc=1,
            want_text="open failed: InvalidArgument: net_ring0 (net_ring) offers 16 RX / 16 TX queues, 64 asked")
    print("smoke:", "FAIL " + "; ".join(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
