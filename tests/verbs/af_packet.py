"""tests/verbs: stock verbs and rdma_cm programs, both ends under `uroce run`
in two processes, each on its end of a veth pair (net_af_packet) in a network
namespace this test creates: the frames go through the kernel's veth, not
memif's shared memory. Every cell of stock_tools.py and rdmacm_tools.py
(the pingpongs with and without -e, perftest by transport, -q 4, -b, -a and
-R, rping, ucmatose, udaddy, rdma_server/rdma_client), run by their own code
with the link swapped, except the UC and UD bandwidth cells (ib_send_bw -c UC,
-c UD): the receiving af_packet ring drops frames when it overflows, nothing
resends them on an unreliable transport, and perftest's server waits for every
message without a timeout. Under a sanitizer (CI's ASan run) only a
representative set runs (SANITIZED_SET), each cell being several times slower
there; the library's code under ASan is what stock_tools.py's memif cells
already cover. Each must complete on both ends with its own success output, and frames must
have crossed the veth pair both ways during it (its kernel counters).
Needs root (exit 77 without it). Every process is stopped by its PID and the
namespace is removed, also on failure.
Usage: af_packet.py UROCE_BIN LIBIBVERBS_SO LIBRDMACM_SO
"""
import sys

import rdmacm_tools as rt  # noqa: E402  (reads argv[3])
import stock_tools as st  # noqa: E402  (reads argv[1:3]; the cells, pair, run_pair)

harness = st.harness
# The out-of-band TCP ports and rdma_cm ports: the namespace has a loopback of
# its own, so nothing outside it can hold them.
STOCK_PORT, RDMACM_PORT = 19500, 7000
UNRELIABLE_BW = {"send_bw_uc", "send_bw_ud"}
SANITIZED_SET = {"rc_pingpong", "ud_pingpong", "srq_pingpong", "write_bw", "read_bw", "send_bw", "send_lat", "atomic_bw",
                 "rping", "ucmatose", "udaddy"}


def veth_packets(ns):
    """(frames va sent, frames vb sent): the server's and the client's."""
    return tuple(int(harness.sh("cat", f"/sys/class/net/{i}/statistics/tx_packets", ns=ns).stdout) for i in ("va", "vb"))


def over_veth(ns, name, run):
    before = veth_packets(ns)
    run()
    sent = [b - a for a, b in zip(before, veth_packets(ns))]
    st.check(min(sent) > 0, f"{name}: {sent[0]} frames from the server on va, {sent[1]} from the client on vb")


def main():
    harness.need_root("af_packet on a veth pair in a network namespace")
    if st.SANITIZED:
        print(f"sanitized build: only {sorted(SANITIZED_SET)} (the main build runs every cell)")

    def wanted(name):
        return name not in UNRELIABLE_BW and (not st.SANITIZED or name in SANITIZED_SET)

    with harness.netns("verbs-afp") as ns, harness.tempdir("verbs-afp") as d:
        harness.VethPair(ns)
        st.LINK = st.AfPacketLink(ns)
        for i, (name, *cell) in enumerate(st.CELLS):
            if wanted(name):
                over_veth(ns, name, lambda: st.pair(d, STOCK_PORT + i, name, *cell))
        for i, (name, *cell) in enumerate(rt.CELLS):
            if wanted(name):
                over_veth(ns, name, lambda: rt.pair(d, RDMACM_PORT + i, name, *cell))
    print(f"{len(st.failures)} failed" if st.failures else "all passed")
    return 1 if st.failures else 0


if __name__ == "__main__":
    sys.exit(main())
