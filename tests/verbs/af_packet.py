"""tests/verbs: stock verbs and rdma_cm programs, both ends under `uroce run`
in two processes, each on its end of a veth pair (net_af_packet) in a network
namespace this test creates: the frames go through the kernel's veth, not
memif's shared memory. A representative set of stock_tools.py's and
rdmacm_tools.py's cells, run by their own code with the link swapped:
ibv_rc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong, ib_write_bw, ib_read_bw,
ib_send_bw, ib_send_lat, ib_atomic_bw, rping -v -V -C 10, ucmatose, udaddy.
Each must complete on both ends with its own success output, and frames must
have crossed the veth pair both ways during it (its kernel counters).
Needs root (exit 77 without it). Every process is stopped by its PID and the
namespace is removed, also on failure.
Usage: af_packet.py UROCE_BIN LIBIBVERBS_SO LIBRDMACM_SO
"""
import sys

import rdmacm_tools as rt  # noqa: E402  (reads argv[3])
import stock_tools as st  # noqa: E402  (reads argv[1:3]; the cells, pair, run_pair)

harness = st.harness
STOCK = ["rc_pingpong", "ud_pingpong", "srq_pingpong", "write_bw", "read_bw", "send_bw", "send_lat", "atomic_bw"]
RDMACM = ["rping", "ucmatose", "udaddy"]
# The out-of-band TCP ports and rdma_cm ports: the namespace has a loopback of
# its own, so nothing outside it can hold them.
STOCK_PORT, RDMACM_PORT = 19500, 7000


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
    stock = {name: (argv, ok_re) for name, argv, ok_re in st.CELLS}
    rdmacm = {name: (srv, cli, ok_re) for name, srv, cli, ok_re in rt.CELLS}
    with harness.netns("verbs-afp") as ns, harness.tempdir("verbs-afp") as d:
        harness.VethPair(ns)
        st.LINK = st.AfPacketLink(ns)
        for i, name in enumerate(STOCK):
            over_veth(ns, name, lambda: st.pair(d, STOCK_PORT + i, name, *stock[name]))
        for i, name in enumerate(RDMACM):
            over_veth(ns, name, lambda: rt.pair(d, RDMACM_PORT + i, name, *rdmacm[name]))
    print(f"{len(st.failures)} failed" if st.failures else "all passed")
    return 1 if st.failures else 0


if __name__ == "__main__":
    sys.exit(main())
