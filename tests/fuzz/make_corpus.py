#!/usr/bin/env python3
"""Seeds the fuzz corpora from the captured pcaps in tests/data.

  corpus/packet/  single frames as captured (RoCE of every opcode seen, and
                  the ARP/other frames in the files), for fuzz_packet
  corpus/cm_mad/  the 256-byte CM MADs carried to QP1 (UD SEND to DestQP 1),
                  for fuzz_cm_mad
  corpus/rx/      runs of consecutive RoCE frames in fuzz_rx's input format
                  (state byte, then [flags0][flags1][len16 LE][frame] records)
                  with every fix-up on, so they reach the transport
  corpus/cm_protocol/  scripted CM conversations in fuzz_cm_protocol's
                  operation format: passive and active connect, accept,
                  RTU, disconnect both ways, REJ, MRA, timeouts, SIDR both
                  ways, a stale REQ, malformed MADs, a reflected MAD

Deterministic: the same pcaps give the same files. Usage:
  tests/fuzz/make_corpus.py [--data tests/data] [--out tests/fuzz/corpus]
"""
import argparse
import hashlib
import pathlib
import struct

ROCE_PORT = 4791
PER_PCAP_PACKET = 12   # distinct (ethertype, opcode, size class) frames per pcap
RX_WINDOW = 6          # frames per rx seed
RX_WINDOWS = 3         # rx seeds per pcap in RTS (plus one per other state)

# fuzz_rx flags0 bits (see fuzz_rx.cc)
FIX_SUMS, FIX_LENS, TO_US, SET_PSN = 0x01, 0x02, 0x40, 0x80
KEYED_OPCODES = {0x06, 0x0A, 0x0B, 0x0C, 0x13, 0x14, 0x26, 0x2A, 0x2B}  # RETH or AtomicETH
STATE_RESET, STATE_INIT, STATE_RTR, STATE_RTS, STATE_SQD, STATE_SQE, STATE_ERR = range(7)
POST_SENDS = 0x08


def frames(path):
    data = path.read_bytes()
    magic = struct.unpack_from('<I', data, 0)[0]
    if magic != 0xA1B2C3D4:
        raise SystemExit(f'{path}: not a little-endian microsecond pcap')
    off = 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack_from('<IIII', data, off)
        off += 16
        yield data[off:off + incl]
        off += incl


def roce_bth(f):
    """Offset of the BTH if f is a RoCEv2 (UDP 4791) or RoCEv1 frame, else None."""
    if len(f) < 14:
        return None
    l3, et = 14, struct.unpack_from('>H', f, 12)[0]
    if et == 0x8100 and len(f) >= 18:
        l3, et = 18, struct.unpack_from('>H', f, 16)[0]
    if et == 0x0800 and len(f) >= l3 + 28 and f[l3 + 9] == 17:
        udp = l3 + (f[l3] & 0xF) * 4
        if len(f) >= udp + 8 and struct.unpack_from('>H', f, udp + 2)[0] == ROCE_PORT:
            return udp + 8
    if et == 0x86DD and len(f) >= l3 + 48 and f[l3 + 6] == 17:
        if struct.unpack_from('>H', f, l3 + 42)[0] == ROCE_PORT:
            return l3 + 48
    if et == 0x8915 and len(f) >= l3 + 40:
        return l3 + 40
    return None


def rx_flags(opcode):
    svc = opcode & 0xE0
    qp = {0x00: 1, 0x20: 2, 0x60: 3}.get(svc, 0)
    key = 1 if opcode in KEYED_OPCODES else 0
    return FIX_SUMS | FIX_LENS | TO_US | SET_PSN | qp << 2 | key << 4


def rx_seed(state, frs):
    out = bytearray([state])
    for f in frs:
        bth = roce_bth(f)
        flags0 = rx_flags(f[bth]) if bth is not None and bth < len(f) else 0
        flags1 = 0x14  # PSN delta 0, clock +1 us
        out += bytes([flags0, flags1]) + struct.pack('<H', len(f)) + f
    return bytes(out)


# fuzz_cm_protocol operations and MAD attributes (see fuzz_cm_protocol.cc)
LISTEN, CONNECT, ACCEPT, REJECT, DISCONNECT, DESTROY, MAD, DUP, CLOCK, REFLECT = range(10)
REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP = range(9)
F_REMOTE, F_LOCAL, F_VALID, F_QPN_LEN, F_QKEY, F_SHORT, F_HDR, F_BYTE = (1 << i for i in range(8))
CLOCK_67S = 26  # 2^26 us


BUSY = 0x80  # attr bit 7: the events stay queued until after the next operation


def mad(attr, fix, seed=0, conv=0, busy=False, **over):
    """One inject-MAD operation; seed varies the fields (and the comm IDs the fuzzer makes up)."""
    s = bytearray((seed * 29 + i * 7) & 0xFF for i in range(16))
    s[0] &= 0xFE  # the service ID: port 7174 (listen / connect with a = 0)
    for k, v in over.items():
        s[int(k[1:])] = v
    return bytes([MAD, attr | conv << 4 | (BUSY if busy else 0), fix]) + bytes(s)


def cm_protocol_seeds():
    ok = F_REMOTE | F_LOCAL
    return {
        'passive-uc': [LISTEN, 0, *mad(REQ, F_VALID, 18, s2=1), ACCEPT, 0x80, *mad(RTU, ok, 18), DISCONNECT, 1,
                       CLOCK, 23, CLOCK, 23],
        'passive-full': [LISTEN, 0, *mad(REQ, F_VALID, s2=0), ACCEPT, 0, *mad(RTU, ok),
                         *mad(DREQ, ok | F_QPN_LEN), DUP, CLOCK, CLOCK_67S],
        'passive-mra': [LISTEN, 0, *mad(REQ, F_VALID, 1, s2=0), DUP, CLOCK, 22, ACCEPT, 0, *mad(RTU, ok, 1),
                        DISCONNECT, 1, *mad(DREP, ok, 1), CLOCK, CLOCK_67S],
        'passive-lost-rtu': [LISTEN, 0, *mad(REQ, F_VALID, 2), ACCEPT, 0, CLOCK, 23, CLOCK, 23,
                             *mad(RTU, ok, 2), CLOCK, CLOCK_67S],
        'passive-reject': [LISTEN, 2, *mad(REQ, F_VALID, 3, s0=1), REJECT, 0, DUP, DESTROY, 0],
        'active-full': [CONNECT, 0, *mad(REP, F_REMOTE | F_VALID, 4), DUP, *mad(DREQ, ok | F_QPN_LEN, 4),
                        CLOCK, CLOCK_67S],
        'active-disconnect': [CONNECT, 0, *mad(REP, F_REMOTE | F_VALID, 5), DISCONNECT, 0, CLOCK, 23,
                              *mad(DREP, ok, 5), CLOCK, CLOCK_67S],
        'active-rej': [CONNECT, 0, *mad(REJ, F_REMOTE | F_QPN_LEN, 6), DESTROY, 0],
        'active-mra': [CONNECT, 2, *mad(MRA, F_REMOTE, 7, s5=0), CLOCK, 24, *mad(REP, F_REMOTE | F_VALID, 7)],
        'active-timeout': [CONNECT, 0] + [CLOCK, 22] * 20,
        'sidr-passive': [LISTEN, 1, *mad(SIDR_REQ, F_VALID, 8), ACCEPT, 0, DUP],
        'sidr-active': [CONNECT, 1, *mad(SIDR_REP, F_REMOTE | F_VALID | F_QPN_LEN, 9), DESTROY, 0],
        'sidr-active-reject': [CONNECT, 3, *mad(SIDR_REP, F_REMOTE | F_QPN_LEN, 17), CLOCK, 24],
        'stale': [LISTEN, 0, *mad(REQ, F_VALID, 10, s3=0, s4=0), ACCEPT, 0, *mad(RTU, ok, 10),
                  *mad(REQ, F_VALID, 11, s3=0, s4=0), CLOCK, 20],
        'malformed': [LISTEN, 0, *mad(REQ, F_VALID | F_HDR, 12, s15=0, s14=2), *mad(REQ, F_VALID | F_QKEY, 12),
                      *mad(REQ, F_VALID | F_SHORT, 12), *mad(REJ, 0, 13), *mad(RTU, F_BYTE, 14, s13=17, s12=0x99),
                      *mad(REQ, F_VALID, 15)],
        'reflect': [CONNECT, 0, REFLECT, 0, CLOCK, 20, LISTEN, 0, REFLECT, 1],
        'listener-gone': [LISTEN, 0, *mad(REQ, F_VALID, 16), DESTROY, 0, DUP, CLOCK, 20],
        # The REQ arrives, the consumer has not taken its kConnectRequest yet, and destroys the
        # listener: the request must be rejected and its id go too (pingpong -R srq found this).
        'listener-gone-busy': [LISTEN, 0, *mad(REQ, F_VALID, 19, busy=True), DESTROY, 0, DUP, CLOCK, 20],
    }


def write(dirpath, name, blob, seen):
    digest = hashlib.sha1(blob).hexdigest()
    if digest in seen:
        return
    seen.add(digest)
    (dirpath / f'{name}-{digest[:12]}').write_bytes(blob)


def main():
    here = pathlib.Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--data', type=pathlib.Path, default=here.parent / 'data')
    ap.add_argument('--out', type=pathlib.Path, default=here / 'corpus')
    args = ap.parse_args()
    dirs = {t: args.out / t for t in ('packet', 'cm_mad', 'rx', 'cm_protocol')}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
        for old in d.iterdir():
            old.unlink()
    seen = set()
    for pcap in sorted(args.data.glob('*.pcap')):
        stem = pcap.stem
        all_frames = list(frames(pcap))
        keys = set()
        n = 0
        for f in all_frames:
            bth = roce_bth(f)
            et = f[12:14] if len(f) >= 14 else b''
            opcode = f[bth] if bth is not None and bth < len(f) else -1
            key = (et, opcode, min(len(f) // 512, 4))
            if key in keys or n >= PER_PCAP_PACKET:
                continue
            keys.add(key)
            n += 1
            write(dirs['packet'], stem, f, seen)
            # CM MADs: UD SEND Only (0x64) to QP1, after BTH (12) and DETH (8).
            if opcode == 0x64 and struct.unpack_from('>I', f, bth + 4)[0] & 0xFFFFFF == 1:
                write(dirs['cm_mad'], stem, f[bth + 20:bth + 20 + 256], seen)
        for f in all_frames:  # every MAD, not just the first of each size class
            bth = roce_bth(f)
            if bth is not None and f[bth] == 0x64 and struct.unpack_from('>I', f, bth + 4)[0] & 0xFFFFFF == 1:
                write(dirs['cm_mad'], stem, f[bth + 20:bth + 20 + 256], seen)
        roce = [f for f in all_frames if roce_bth(f) is not None]
        if not roce:
            continue
        step = max(1, (len(roce) - RX_WINDOW) // RX_WINDOWS + 1)
        for w in range(RX_WINDOWS):
            window = roce[w * step:w * step + RX_WINDOW]
            if window:
                write(dirs['rx'], f'{stem}-rts', rx_seed(STATE_RTS | POST_SENDS, window), seen)
        first = roce[:RX_WINDOW]
        for name, state in (('reset', STATE_RESET), ('init', STATE_INIT), ('rtr', STATE_RTR),
                            ('sqd', STATE_SQD | POST_SENDS), ('sqe', STATE_SQE | POST_SENDS),
                            ('err', STATE_ERR | POST_SENDS)):
            write(dirs['rx'], f'{stem}-{name}', rx_seed(state, first), seen)
    for name, ops in cm_protocol_seeds().items():
        write(dirs['cm_protocol'], name, bytes(ops), seen)
    for t, d in dirs.items():
        files = list(d.iterdir())
        print(f'{t}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes')


if __name__ == '__main__':
    main()
