#!/usr/bin/env python3
"""tests/dpdk (a): two processes joined by net_memif exchange frames both ways.

Server and client are separate uroce-rawport processes on a memif socket in a
per-test temp dir; each sends --count frames and checks every frame the other
sent (sequence, length, content). Cases: 1500-byte frames; 64-byte frames sent
from external buffers (zero-copy TX groundwork); two queue pairs.
Usage: memif_exchange.py PATH/uroce-rawport
"""
import os
import sys
import time

import harness


def exchange(binary, tag, args, client_dev_extra="", client_args=()):
    failures = []
    with harness.tempdir("memif") as d, harness.procs() as started:
        sock = os.path.join(d, "memif.sock")
        srv = harness.Proc(f"{tag}-server", [binary, "--", "exchange", "--dev",
                                             f"net_memif0,role=server,socket={sock},socket-abstract=no", *args], d)
        started.append(srv)
        harness.wait_for(lambda: os.path.exists(sock) or srv.p.poll() is not None, 10)
        cli = harness.Proc(f"{tag}-client", [binary, "--", "exchange", "--dev",
                                             f"net_memif0,role=client,socket={sock},socket-abstract=no{client_dev_extra}",
                                             *args, *client_args], d)
        started.append(cli)
        rc_c = cli.wait(60)
        rc_s = srv.wait(30)
        for p, rc in ((srv, rc_s), (cli, rc_c)):
            out = p.output()
            print(out, end="")
            f = p.fields("exchange ")
            harness.check(rc == 0 and "result PASS" in out and f.get("received") == f.get("expected")
                          and f.get("bad") == "0",
                          f"{p.name}: rc={rc} received={f.get('received')}/{f.get('expected')} bad={f.get('bad')}",
                          failures)
    return failures


def main():
    binary = sys.argv[1]
    failures = []
    failures += exchange(binary, "mtu", ["--count", "5000", "--size", "1500"])
    failures += exchange(binary, "extbuf", ["--count", "2000", "--size", "64", "--extbuf"])
    failures += exchange(binary, "2q", ["--count", "2000", "--size", "128", "--queues", "2"])
    print("memif_exchange:", "FAIL " + "; ".join(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    t = time.monotonic()
    rc = main()
    print(f"({time.monotonic() - t:.1f} s)")
    sys.exit(rc)
