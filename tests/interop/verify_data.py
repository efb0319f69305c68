"""Data checks of the interop loss cells: did every byte of an RDMA WRITE or READ land right
while frames were lost and retransmitted? Python 3 standard library only; used by harness.py.

Where our stack is the destination we check our registered buffer (`uroce perf --save-buffer`)
against what the peer's buffer holds. perftest 4.5 (src/perftest_resources.c, create_single_mr)
fills its whole buffer with `(char)rand()` right after `srand(time(NULL))`, except in write_lat,
so the peer's bytes are glibc's rand() stream for a seed that is the guest's clock in seconds
when the tool started: we find the seed near the run's wall-clock time from the first 16 bytes
and then compare every byte the test moved. The host and the guest are both Debian 12, and
glibc's rand() (the TYPE_3 additive generator) has not changed in decades; we call the host's.

Where rxe is the destination (we write to it, or it reads from us) we cannot read its memory:
perftest's write_bw MR has no remote-read access. There we check the guest's own capture (QEMU's
filter-dump of the guest NIC: every frame that reached rxe): every WRITE or READ response
payload that arrived must equal our buffer at the address it names, and every packet of every
message must have arrived at least once.

perftest's buffer layout (perftest_communication.c, ctx_set_send_wqes; the same in uroce perf):
QP i sends from / reads into `buf + i*BUFF` and advertises `buf + (q + i)*BUFF`, BUFF =
max(size, cycle buffer); bw requesters step both addresses by INC(size) and wrap within the
cycle buffer, only while size <= cycle/2 (increase_loc_addr / increase_rem_addr).
"""
from __future__ import annotations

import ctypes
import socket
import struct
from typing import Iterable

ROCE_PORT = 4791
PSN_MOD = 1 << 24
CYCLE = 4096        # both sides' page size: the exchanged cycle buffer
CACHE_LINE = 64     # perftest's DEF_CACHE_LINE_SIZE (both sides)

# BTH opcodes (IBA 9.2, Table 38), RC
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_LAST_IMM, SEND_ONLY, SEND_ONLY_IMM = range(0x00, 0x06)
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_LAST_IMM, WRITE_ONLY, WRITE_ONLY_IMM = range(0x06, 0x0C)
READ_REQ, READ_RESP_FIRST, READ_RESP_MIDDLE, READ_RESP_LAST, READ_RESP_ONLY = range(0x0C, 0x11)
ACK = 0x11
# bytes of extended headers after the BTH: RETH 16, AETH 4, ImmDt 4 (RC: no DETH)
_EXT = {SEND_FIRST: 0, SEND_MIDDLE: 0, SEND_LAST: 0, SEND_LAST_IMM: 4, SEND_ONLY: 0, SEND_ONLY_IMM: 4,
        WRITE_FIRST: 16, WRITE_MIDDLE: 0, WRITE_LAST: 0, WRITE_LAST_IMM: 4, WRITE_ONLY: 16,
        WRITE_ONLY_IMM: 20, READ_REQ: 16, READ_RESP_FIRST: 4, READ_RESP_MIDDLE: 0,
        READ_RESP_LAST: 4, READ_RESP_ONLY: 4, ACK: 4}


def roce(frame: bytes) -> dict | None:
    """The fields of an Ethernet/IPv4|IPv6/UDP:4791 RC frame the checks need, or None."""
    if len(frame) < 14:
        return None
    et = struct.unpack("!H", frame[12:14])[0]
    if et == 0x0800 and len(frame) >= 34 and frame[23] == 17:
        ihl = (frame[14] & 0x0F) * 4
        tot = struct.unpack("!H", frame[16:18])[0]
        src, dst = socket.inet_ntoa(frame[26:30]), socket.inet_ntoa(frame[30:34])
        l4 = frame[14 + ihl:14 + tot]
    elif et == 0x86DD and len(frame) >= 54 and frame[20] == 17:
        plen = struct.unpack("!H", frame[18:20])[0]
        src = socket.inet_ntop(socket.AF_INET6, frame[22:38])
        dst = socket.inet_ntop(socket.AF_INET6, frame[38:54])
        l4 = frame[54:54 + plen]
    else:
        return None
    if len(l4) < 8 + 12 + 4 or struct.unpack("!H", l4[2:4])[0] != ROCE_PORT:
        return None
    bth = l4[8:20]
    op = bth[0]
    pad = (bth[1] >> 4) & 3
    f = {"src": src, "dst": dst, "op": op, "qpn": struct.unpack("!I", bth[4:8])[0] & 0xFFFFFF,
         "psn": struct.unpack("!I", bth[8:12])[0] & 0xFFFFFF}
    ext = _EXT.get(op)
    if ext is None:
        return f
    hdr = l4[20:20 + ext]
    if op in (WRITE_FIRST, WRITE_ONLY, WRITE_ONLY_IMM, READ_REQ):
        f["va"], f["rkey"], f["len"] = struct.unpack("!QII", hdr[:16])
    f["payload"] = bytes(l4[20 + ext:len(l4) - 4 - pad])
    return f


def written_offsets(size: int, iters: int) -> list[int]:
    """Offsets within a QP's area that a bw run with these parameters touches (see above)."""
    inc = -(-size // CACHE_LINE) * CACHE_LINE if size > CACHE_LINE else CACHE_LINE
    if size > CYCLE // 2:
        return [0]
    return [k * inc for k in range(min(iters, CYCLE // inc))]


def slot_bytes(size: int) -> int:
    """BUFF_SIZE: one QP's area, the same on both sides (same size, same cycle buffer)."""
    return max(size, CYCLE)


_libc = None


def glibc_rand_bytes(seed: int, n: int) -> bytes:
    """The first n bytes perftest writes after srand(seed): the low byte of each rand()."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL("libc.so.6")
    _libc.srand(ctypes.c_uint(seed & 0xFFFFFFFF))
    r = _libc.rand
    return bytes(r() & 0xFF for _ in range(n))


def find_seed(sample: bytes, index: int, epochs: Iterable[int]) -> int | None:
    """The seed whose rand() byte stream holds `sample` at `index`, among `epochs`."""
    for s in epochs:
        if glibc_rand_bytes(s, index + len(sample))[index:] == sample:
            return s
    return None


def check_against_perftest(ours: bytes, our_off: int, peer_off: int, size: int, iters: int,
                           epoch_lo: int, epoch_hi: int) -> dict:
    """Our buffer at our_off + o must equal the peer's perftest buffer at peer_off + o for every
    offset o the run wrote. epoch_lo..epoch_hi: wall-clock seconds around the run."""
    offs = written_offsets(size, iters)
    first = ours[our_off:our_off + 16]
    seed = find_seed(first, peer_off, range(epoch_hi, epoch_lo - 1, -1))
    if seed is None:
        return {"ok": False, "why": f"no srand(t) seed in {epoch_lo}..{epoch_hi} gives our first "
                f"16 bytes {first.hex()} at peer offset {peer_off}"}
    want = glibc_rand_bytes(seed, peer_off + max(offs) + size)
    bad = [o for o in offs
           if ours[our_off + o:our_off + o + size] != want[peer_off + o:peer_off + o + size]]
    return {"ok": not bad, "seed": seed, "bytes": len(offs) * size, "messages": iters,
            "why": f"{len(bad)} of {len(offs)} areas differ" if bad else "",
            "how": "our buffer = the peer's perftest buffer (glibc rand() after srand(time))"}


def _psn_diff(a: int, b: int) -> int:
    d = (a - b) % PSN_MOD
    return d - PSN_MOD if d >= PSN_MOD // 2 else d


def _packets(length: int, mtu: int) -> int:
    return max(1, -(-length // mtu))


def check_wire(ours: bytes, our_off: int, requests: list[dict], data: list[dict], size: int,
               iters: int) -> dict:
    """Every payload in `data` (frames that reached rxe) must equal our buffer at our_off plus its
    address minus the run's base address, and every packet of every request must be there.
    `requests`: frames with a RETH naming the addresses (WRITE First/Only, READ requests);
    for a WRITE they are the data frames themselves."""
    if not requests or not data:
        return {"ok": False, "why": f"{len(requests)} requests, {len(data)} data frames in the capture"}
    mtu = max(len(f["payload"]) for f in data)
    base = min(r["va"] for r in requests)
    where: dict[int, int] = {}   # PSN -> address of its payload
    msgs: dict[int, int] = {}    # first PSN -> packets
    for r in requests:
        n = _packets(r["len"], mtu)
        msgs[r["psn"]] = n
        for k in range(n):
            where[(r["psn"] + k) % PSN_MOD] = r["va"] + k * mtu
    seen: set[int] = set()
    bad, unplaced, nbytes = 0, 0, 0
    for f in data:
        va = where.get(f["psn"])
        if va is None:
            unplaced += 1
            continue
        o = our_off + va - base
        nbytes += len(f["payload"])
        if ours[o:o + len(f["payload"])] != f["payload"]:
            bad += 1
        seen.add(f["psn"])
    missing = sum(1 for p, n in msgs.items() for k in range(n) if (p + k) % PSN_MOD not in seen)
    # A READ re-requested from a response PSN inside an earlier request (IBA 9.7.5.1) is the
    # same message.
    firsts = [p for p in msgs if not any(0 < _psn_diff(p, q) < n for q, n in msgs.items())]
    ok = bad == 0 and unplaced == 0 and missing == 0 and len(firsts) == iters
    return {"ok": ok, "bytes": nbytes, "messages": len(firsts), "frames": len(data),
            "why": "" if ok else f"{bad} payloads differ, {unplaced} frames without a request, "
                                 f"{missing} packets never arrived, {len(firsts)} of {iters} messages",
            "how": "every payload rxe received (guest capture) = our buffer"}


def peer_retransmissions(frames: Iterable[dict], peer: str) -> int:
    """Request/response packets from `peer` whose (opcode, PSN) arrived before: its resends."""
    seen, dup = set(), 0
    for f in frames:
        if f["src"] != peer or f["op"] == ACK:
            continue
        k = (f["op"], f["qpn"], f["psn"])
        dup += k in seen
        seen.add(k)
    return dup


def check_cell(test: str, ours_role: str, size: int, iters: int, ours_buf: bytes,
               our_frames: list[dict], guest_frames: list[dict], stack_ip: str, guest_ip: str,
               epoch_lo: int, epoch_hi: int) -> dict:
    """The data check of one single-QP write_bw / read_bw cell (see the module comment).
    our_frames: our capture of the cell; guest_frames: the guest's capture of the whole boot."""
    slot = slot_bytes(size)
    guest_qpns = {f["qpn"] for f in our_frames if f["src"] == stack_ip}
    to_guest = [f for f in guest_frames if f["src"] == stack_ip and f["qpn"] in guest_qpns]
    if test == "write_bw" and ours_role == "server":     # rxe wrote into our area q=1
        r = check_against_perftest(ours_buf, slot, 0, size, iters, epoch_lo, epoch_hi)
    elif test == "read_bw" and ours_role == "client":    # we read rxe's area q=1 into ours 0
        r = check_against_perftest(ours_buf, 0, slot, size, iters, epoch_lo, epoch_hi)
    elif test == "write_bw":                             # we wrote from our area 0 into rxe
        writes = [f for f in to_guest if WRITE_FIRST <= f["op"] <= WRITE_ONLY_IMM]
        r = check_wire(ours_buf, 0, [f for f in writes if "va" in f], writes, size, iters)
    elif test == "read_bw":                              # rxe read our area q=1
        reqs = [f for f in our_frames if f["src"] == guest_ip and f["op"] == READ_REQ]
        resps = [f for f in to_guest if READ_RESP_FIRST <= f["op"] <= READ_RESP_ONLY]
        r = check_wire(ours_buf, slot, list({f["psn"]: f for f in reqs}.values()), resps, size, iters)
    else:
        return {"ok": False, "why": f"no data check for {test}"}
    r["peer_retransmitted"] = peer_retransmissions(our_frames, guest_ip)
    return r
