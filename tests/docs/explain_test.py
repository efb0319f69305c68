#!/usr/bin/env python3
"""`uroce dump --explain` checked against the spec, on the rxe captures.

This script parses every RoCE frame of tests/data itself (its own pcap,
IPv4/UDP, BTH, RETH, AtomicETH and AETH decoding; nothing of uroce's parser)
and derives from the InfiniBand spec what the explanation of each frame must
say. It also checks that the rule holds in the capture (Linux rxe, an
independent implementation), so the expectation is neither our own output
nor an assumption:

  - IBA 9.7.5.1: a request packet with AckReq set must be acknowledged:
    "must ACK PSN <psn>"; and rxe does (an ACK/NAK/response at that PSN or
    beyond follows on the same QP);
  - IBA 9.7.5.2 (READ): a READ Request for L bytes at path MTU M is
    answered by max(1, ceil(L/M)) READ Response packets with PSNs psn ..
    psn+n-1, the explanation must name that range and rxe's responses carry
    exactly those PSNs;
  - IBA 9.7.5.1 (AETH, Tables 41-43) and Table 45: the AETH syndrome: 000xxxxx ACK, 001ttttt RNR
    NAK with timer code t (Table 45: code 0 = 655.36 ms), 011ccccc NAK with
    code c (0 PSN sequence error, 1 invalid request, 2 remote access error,
    3 remote operational error); after a PSN sequence error NAK or an RNR NAK
    the requester resends from the NAK's PSN (checked in the capture);
  - atomics are answered by an Atomic Acknowledge at the request's PSN;
  - UC and UD are never acknowledged; a PSN that does not advance on a connection is
    a retransmission;
  - a CNP (BTH opcode 0x81, RoCEv2 Annex A17.9) and an ECN CE mark (RFC 3168)
    are explained as congestion signals (frames built here, with their ICRC,
    since the captures carry none).

Usage: explain_test.py UROCE_EXE DATA_DIR
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

MTU = 1024  # path MTU of every capture except *-mtu4096 (tests/data/README.md)
RNR_MS = [655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48, 0.64, 0.96, 1.28, 1.92, 2.56,
          3.84, 5.12, 7.68, 10.24, 15.36, 20.48, 30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52]
NAK_NAMES = ["PSN Sequence Error", "Invalid Request", "Remote Access Error", "Remote Operational Error"]
# BTH opcodes (IBA Table 38), RC and UC.
READ_REQ, READ_RESP = 0x0C, range(0x0D, 0x11)
ACK, ATOMIC_ACK, CMP_SWAP, FETCH_ADD = 0x11, 0x12, 0x13, 0x14
RC_REQUESTS = set(range(0x00, 0x0D)) | {CMP_SWAP, FETCH_ADD, 0x16, 0x17}
WITH_RETH = {0x06, 0x0A, 0x0B, 0x0C, 0x26, 0x2A, 0x2B}
UD_SEND = {0x64, 0x65}
UC_REQUESTS = set(range(0x20, 0x2C))

errors = []


def check(cond, msg):
    if not cond:
        errors.append(msg)


def read_pcap(path):
    data = open(path, "rb").read()
    magic = struct.unpack_from("<I", data)[0]
    assert magic == 0xA1B2C3D4, path
    off, frames = 24, []
    while off + 16 <= len(data):
        incl = struct.unpack_from("<I", data, off + 8)[0]
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


def parse(frame):
    """A RoCEv2-over-IPv4 frame to a dict, or None."""
    if len(frame) < 14 + 20 + 8 + 12 or struct.unpack_from(">H", frame, 12)[0] != 0x0800:
        return None
    ihl = (frame[14] & 0x0F) * 4
    if frame[23] != 17:
        return None
    udp = 14 + ihl
    if struct.unpack_from(">H", frame, udp + 2)[0] != 4791:
        return None
    b = udp + 8
    f = {"src": frame[26:30], "dst": frame[30:34], "ecn": frame[15] & 3, "opcode": frame[b],
         "qpn": struct.unpack_from(">I", frame, b + 4)[0] & 0xFFFFFF,
         "ackreq": frame[b + 8] >> 7, "psn": struct.unpack_from(">I", frame, b + 8)[0] & 0xFFFFFF}
    ext = b + 12
    op = f["opcode"]
    if op in WITH_RETH:
        f["reth_len"] = struct.unpack_from(">I", frame, ext + 12)[0]
    if op in (ACK, ATOMIC_ACK) or op in (0x0D, 0x0F, 0x10):
        f["syndrome"] = frame[ext]
    return f


def psn(v):
    return "0x%06x" % (v & 0xFFFFFF)


def dump_explain(uroce, path, mtu=MTU):
    out = subprocess.run([uroce, "dump", "--json", "--explain", "--mtu", str(mtu), path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, check=True).stdout
    return {fr["frame"]: fr.get("explain", "") for fr in json.loads(out)["files"][0]["frames"]}


# Linux rxe's addresses in the captures (tests/data/README.md); 10.60.0.3 is the
# host-peer files' scripted Python peer, which withholds ACKs on purpose.
RXE = {bytes([10, 50, 0, 1]), bytes([10, 50, 0, 2]), bytes([10, 60, 0, 1])}


def later_frames(frames, i, src, dst):
    """Frames after index i that go src -> dst."""
    return [g for g in frames[i + 1:] if g and g["src"] == src and g["dst"] == dst]


def check_file(uroce, path):
    mtu = 4096 if "mtu4096" in path else MTU
    raw = read_pcap(path)
    frames = [parse(x) for x in raw]
    explained = dump_explain(uroce, path, mtu)
    name = os.path.basename(path)
    seen = {}
    n_checked = 0
    for i, f in enumerate(frames):
        if not f:
            continue
        n = i + 1
        e = explained.get(n)
        if e is None:
            errors.append("%s #%d: no explain for a RoCE frame" % (name, n))
            continue
        where = "%s #%d (%s)" % (name, n, e[:90])
        op = f["opcode"]
        conn = (f["src"], f["dst"], f["qpn"])
        replies = lambda: [g for g in frames[i + 1:] if g and g["src"] == f["dst"] and g["dst"] == f["src"]]
        if op in RC_REQUESTS:
            prev = seen.get(conn)
            if prev is not None and ((f["psn"] - prev) & 0xFFFFFF) >= 0x800000 or prev == f["psn"]:
                check("not beyond %s" % psn(prev) in e, where + ": a PSN that does not advance is not called a retransmission")
            else:
                seen[conn] = f["psn"]
            if op == READ_REQ:
                count = max(1, -(-f["reth_len"] // mtu))
                if count == 1:
                    check("one READ Response Only, PSN %s" % psn(f["psn"]) in e, where + ": READ response PSN")
                else:
                    check("%d READ Response packets" % count in e and
                          "PSNs %s..%s" % (psn(f["psn"]), psn(f["psn"] + count - 1)) in e, where + ": READ range")
                got = [g["psn"] for g in replies() if g["opcode"] in READ_RESP][:count]
                check(got == [(f["psn"] + k) & 0xFFFFFF for k in range(count)],
                      where + ": rxe's READ responses have PSNs %s" % [psn(x) for x in got])
            elif op in (CMP_SWAP, FETCH_ADD):
                check("Atomic Acknowledge, PSN %s" % psn(f["psn"]) in e, where + ": atomic")
                check(any(g["opcode"] == ATOMIC_ACK and g["psn"] == f["psn"] for g in replies()),
                      where + ": rxe answered with no Atomic Acknowledge at that PSN")
            elif f["ackreq"]:
                check("must ACK PSN %s" % psn(f["psn"]) in e, where + ": AckReq duty")
                if f["dst"] in RXE:
                    check(any(g["opcode"] in (ACK, ATOMIC_ACK) or g["opcode"] in READ_RESP for g in replies()),
                          where + ": rxe never acknowledged it")
            else:
                check("AckReq clear" in e, where + ": AckReq clear")
            n_checked += 1
        elif op in UC_REQUESTS:
            check("UC: never acknowledged" in e, where + ": UC")
            n_checked += 1
        elif op in UD_SEND:
            check("never acknowledged" in e, where + ": UD")
            n_checked += 1
        elif op == ACK:
            syn = f["syndrome"]
            kind, val = syn >> 5, syn & 0x1F
            nxt = [g for g in later_frames(frames, i, f["dst"], f["src"]) if g["opcode"] in RC_REQUESTS]
            if kind == 0:
                check(e.startswith("ACK PSN %s" % psn(f["psn"])), where + ": ACK")
            elif kind == 1:
                check(e.startswith("RNR NAK PSN %s" % psn(f["psn"])) and "%.2f ms" % RNR_MS[val] in e, where + ": RNR NAK")
                check(bool(nxt) and nxt[0]["psn"] == f["psn"], where + ": rxe did not resend from the RNR NAK's PSN")
            elif kind == 3:
                check(("NAK %s" % NAK_NAMES[val]) in e, where + ": NAK code %d" % val)
                if val == 0:
                    check("expected PSN %s" % psn(f["psn"]) in e and "resend everything from PSN %s" % psn(f["psn"]) in e,
                          where + ": PSN sequence error NAK")
                    check(bool(nxt) and nxt[0]["psn"] == f["psn"], where + ": the requester did not go back to the NAK's PSN")
            n_checked += 1
        elif op in READ_RESP:
            check(e.startswith("READ Response") and psn(f["psn"]) in e, where + ": READ response")
            n_checked += 1
        elif op == ATOMIC_ACK:
            check(e.startswith("Atomic Acknowledge PSN %s" % psn(f["psn"])), where + ": atomic ACK")
            n_checked += 1
    return n_checked


def icrc(ip, udp_bth_rest):
    """RoCEv2 ICRC (IBA A17.3.3): CRC-32 over 8 bytes of ones, the IPv4 header with TOS, TTL and checksum as
    ones, the UDP header with its checksum as ones, the BTH with resv8a as ones, then the rest."""
    ip = bytearray(ip)
    ip[1] = 0xFF
    ip[8] = 0xFF
    ip[10:12] = b"\xff\xff"
    rest = bytearray(udp_bth_rest)
    rest[6:8] = b"\xff\xff"
    rest[8 + 4] = 0xFF
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(rest)) & 0xFFFFFFFF)


def synth_frame(opcode, qpn, psn_v, body, ecn=0):
    bth = struct.pack(">BBHII", opcode, 0, 0xFFFF, qpn, psn_v)
    udp_len = 8 + len(bth) + len(body) + 4
    udp = struct.pack(">HHHH", 0xC000, 4791, udp_len, 0)
    ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, ecn, 20 + udp_len, 1, 0x4000, 64, 17, 0,
                               bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])))
    csum = sum(struct.unpack(">10H", bytes(ip)))
    while csum >> 16:
        csum = (csum & 0xFFFF) + (csum >> 16)
    ip[10:12] = struct.pack(">H", ~csum & 0xFFFF)
    rest = udp + bth + body
    eth = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
    return eth + bytes(ip) + rest + icrc(bytes(ip), rest)


def check_synthetic(uroce):
    frames = [synth_frame(0x81, 0x000123, 0, b"\x00" * 16),             # CNP (A17.9: BTH + 16 reserved bytes)
              synth_frame(0x04, 0x000124, 0x10, b"\xab" * 64, ecn=3)]  # SEND Only, ECN CE
    with tempfile.NamedTemporaryFile(suffix=".pcap", delete=False) as t:
        t.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for fr in frames:
            t.write(struct.pack("<IIII", 0, 0, len(fr), len(fr)) + fr)
        path = t.name
    try:
        out = subprocess.run([uroce, "dump", "--verify", "--json", "--explain", path], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        check(out.returncode == 0, "synthetic CNP/CE frames: uroce dump --verify failed: " + out.stderr)
        ex = {fr["frame"]: fr.get("explain", "") for fr in json.loads(out.stdout)["files"][0]["frames"]}
        check(ex.get(1, "").startswith("CNP to QP 0x000123") and "cut its rate" in ex.get(1, ""), "CNP: " + ex.get(1, ""))
        check("ECN is CE" in ex.get(2, "") and "CNP" in ex.get(2, ""), "ECN CE: " + ex.get(2, ""))
    finally:
        os.unlink(path)


def main():
    uroce, data = sys.argv[1], sys.argv[2]
    total = 0
    for path in sorted(glob.glob(os.path.join(data, "*.pcap"))):
        n = check_file(uroce, path)
        print("%-48s %4d frames checked" % (os.path.basename(path), n))
        total += n
    check_synthetic(uroce)
    for e in errors:
        print("FAIL:", e)
    if errors or total < 400:
        sys.exit("%d failures (%d frames checked)" % (len(errors), total))
    print("ok: %d frames explained as the spec and rxe say" % total)


if __name__ == "__main__":
    main()
