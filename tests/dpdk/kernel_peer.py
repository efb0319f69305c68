#!/usr/bin/env python3
"""tests/dpdk (b): two-way traffic with the Linux kernel as the independent peer.

In a network namespace this test creates (and deletes), uroce-rawport opens
  af_packet: one end of a veth pair; the kernel owns the other end, 10.77.0.1
  tap:       a tap interface the PMD creates; the kernel side gets 10.78.0.1
and sends an ARP request for the kernel's address (the kernel must answer with
an ARP reply to our MAC, from its interface's MAC), then ICMP echo requests
(the kernel checks our IPv4/ICMP checksums and echoes the payload back). Each
case also runs with frames sent from external buffers (zero-copy groundwork).
Needs root; skips (77) only when not root.
Usage: kernel_peer.py PATH/uroce-rawport
"""
import os
import sys

import harness


def af_packet_case(binary, extbuf, failures):
    with harness.netns("afp") as ns, harness.tempdir("afp") as d, harness.procs() as started:
        harness.sh("ip", "link", "add", "va", "type", "veth", "peer", "name", "vb", ns=ns)
        harness.sh("ip", "addr", "add", "10.77.0.1/24", "dev", "vb", ns=ns)
        harness.sh("ip", "link", "set", "va", "up", ns=ns)
        harness.sh("ip", "link", "set", "vb", "up", ns=ns)
        kmac = harness.sh("cat", "/sys/class/net/vb/address", ns=ns).stdout.strip()
        argv = [binary, "--", "arp", "--dev", "net_af_packet0,iface=va", "--ip", "10.77.0.2",
                "--target", "10.77.0.1", "--expect-mac", kmac, "--mac", "02:00:00:00:77:02",
                "--icmp", "--count", "5", "--xstats"]
        if extbuf:
            argv.append("--extbuf")
        p = harness.Proc("af_packet" + ("-extbuf" if extbuf else ""), argv, d, ns=ns)
        started.append(p)
        rc = p.wait(60)
        out = p.output()
        print(out, end="")
        arp = p.fields("arp ")
        icmp = p.fields("icmp ")
        harness.check(rc == 0 and arp.get("reply") == "1" and arp.get("kernel_mac") == kmac
                      and icmp.get("echo_replies") == "5",
                      f"{p.name}: rc={rc} arp reply from {arp.get('kernel_mac')} (kernel {kmac}), "
                      f"echo replies {icmp.get('echo_replies')}/5", failures)
        # Our MAC was applied to the kernel interface (af_packet sets it by ioctl).
        vmac = harness.sh("cat", "/sys/class/net/va/address", ns=ns).stdout.strip()
        harness.check(vmac == "02:00:00:00:77:02", f"{p.name}: veth MAC is ours ({vmac})", failures)


def tap_case(binary, extbuf, failures):
    with harness.netns("tap") as ns, harness.tempdir("tap") as d, harness.procs() as started:
        argv = [binary, "--", "arp", "--dev", "net_tap0,iface=utap0", "--ip", "10.78.0.2",
                "--target", "10.78.0.1", "--mac", "02:00:00:00:78:02", "--icmp", "--count", "5"]
        if extbuf:
            argv.append("--extbuf")
        p = harness.Proc("tap" + ("-extbuf" if extbuf else ""), argv, d, ns=ns)
        started.append(p)
        # The PMD creates the interface; give its kernel side an address.
        up = harness.wait_for(lambda: harness.sh("test", "-e", "/sys/class/net/utap0", ns=ns,
                                                 check=False).returncode == 0 or p.p.poll() is not None, 15)
        if up and p.p.poll() is None:
            harness.sh("ip", "addr", "add", "10.78.0.1/24", "dev", "utap0", ns=ns)
        rc = p.wait(60)
        out = p.output()
        print(out, end="")
        arp = p.fields("arp ")
        icmp = p.fields("icmp ")
        harness.check(rc == 0 and arp.get("reply") == "1" and icmp.get("echo_replies") == "5",
                      f"{p.name}: rc={rc} arp reply={arp.get('reply')} echo replies {icmp.get('echo_replies')}/5",
                      failures)


def main():
    harness.need_root("af_packet/tap against the kernel")
    binary = sys.argv[1]
    failures = []
    for extbuf in (False, True):
        af_packet_case(binary, extbuf, failures)
        tap_case(binary, extbuf, failures)
    print("kernel_peer:", "FAIL " + "; ".join(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
