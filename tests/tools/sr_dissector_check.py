#!/usr/bin/env python3
"""Checks the decoders of uroce's extension wire format (docs/LOSS_RECOVERY.md):
the Wireshark Lua post-dissector tools/wireshark/uroce_sr.lua under
  tshark -X lua_script:uroce_sr.lua -r FILE -T fields -e uroce_sr.* ...
and `uroce dump --json` (its "sack" and "place" fields).

1. Synthetic frames this script writes with known values (an ACK with a SACK
   block across the 24-bit PSN wrap, placement headers on SEND Middle, WRITE
   First with its RETH, SEND Only Immediate, over IPv4, IPv6 and 802.1Q), and
   frames that must not decode (a plain ACK, a SEND Middle whose payload starts
   with the magic but whose first PSN does not fit): both decoders must show
   exactly what was written.
2. Every frame of each --capture (a run with selective repeat and spraying):
   both decoders must agree on every SACK and placement field, and the capture
   must hold some of each.

Exit status: 0 all agree; 1 a disagreement or a tool failure; 2 usage error.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tshark_compare import roce_frame  # noqa: E402  (the same frame builder)

FIELDS = ['frame.number', 'uroce_sr.sack.cum', 'uroce_sr.sack.bitmap_bytes', 'uroce_sr.sack.held',
          'uroce_sr.place.first_psn', 'uroce_sr.place.msg_len', 'uroce_sr.place.va', 'uroce_sr.place.rkey',
          'uroce_sr.place.recv_seq']


def frame(kind, vlan, opcode, psn, ext, payload, sport=0xc123):
    pad = (4 - len(payload) % 4) % 4
    bth = struct.pack('!BBHII', opcode, pad << 4, 0xffff, 0x000011, psn & 0xffffff)
    body = bth + ext + payload + bytes(pad)
    l4 = struct.pack('!HHHH', sport, 4791, 8 + len(body) + 4, 0) + body
    return roce_frame(l4, kind, vlan)


def placement(first, length, va, rkey, seq):
    return struct.pack('!IIQII', 0x53 << 24 | first, length, va, rkey, seq)


def sack_block(bits, nbytes):
    b = bytearray(nbytes)
    for i in bits:
        b[i // 8] |= 1 << (i % 8)
    return struct.pack('!BBH', 1, 0, nbytes) + bytes(b)


def runs(psns):
    out = []
    for p in psns:
        if out and (out[-1][1] + 1) & 0xffffff == p:
            out[-1][1] = p
        else:
            out.append([p, p])
    return out


def synthetic():
    """(frames, expected) with expected[i] = {'sack': (cum, bytes, [[lo, hi]...])} or {'place': (...)} or {}."""
    frames, expected = [], []
    for kind, vlan in (('ipv4', False), ('ipv6', False), ('ipv4', True)):
        cum = 0xfffffd  # the held PSNs cross the wrap
        bits = [2, 3, 4, 9, 40]
        aeth = struct.pack('!I', 0x1f << 24 | 5)
        frames.append(frame(kind, vlan, 0x11, cum, aeth, sack_block(bits, 8)))
        expected.append({'sack': (cum, 8, runs([(cum + 1 + i) & 0xffffff for i in bits]))})
        frames.append(frame(kind, vlan, 0x01, 1005, b'', placement(1003, 5000, 0, 0, 7) + bytes(range(100))))
        expected.append({'place': (1003, 5000, 0, 0, 7)})
        reth = struct.pack('!QII', 0x00007f0000001000, 0xabc, 9000)
        frames.append(frame(kind, vlan, 0x06, 0x123456, reth,
                            placement(0x123456, 9000, 0x00007f0000001000, 0xabc, 0) + bytes(1000)))
        expected.append({'place': (0x123456, 9000, 0x00007f0000001000, 0xabc, 0)})
        frames.append(frame(kind, vlan, 0x05, 77, struct.pack('!I', 0x1234), placement(77, 10, 0, 0, 3) + bytes(10)))
        expected.append({'place': (77, 10, 0, 0, 3)})
        frames.append(frame(kind, vlan, 0x11, 500, aeth, b''))  # a plain ACK
        expected.append({})
        frames.append(frame(kind, vlan, 0x01, 900, b'', placement(900, 64, 0, 0, 0) + bytes(40)))  # Middle at its own first PSN
        expected.append({})
    return frames, expected


def write_pcap(path, frames):
    with open(path, 'wb') as f:
        f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for n, fr in enumerate(frames):
            f.write(struct.pack('<IIII', 1_700_000_000, n, len(fr), len(fr)) + fr)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError('%s: exit %d: %s' % (' '.join(cmd), r.returncode, r.stderr.strip()[-500:]))
    return r.stdout


def parse_held(s):
    out = []
    for part in filter(None, s.split(',')):
        lo, _, hi = part.partition('-')
        out.append([int(lo), int(hi or lo)])
    return out


def lua_decode(tshark, lua, path):
    cmd = [tshark, '-X', 'lua_script:' + lua, '-r', path, '-T', 'fields', '-E', 'occurrence=f']
    for f in FIELDS:
        cmd += ['-e', f]
    out = {}
    for line in run(cmd).splitlines():
        v = line.split('\t')
        if len(v) != len(FIELDS):
            continue
        d = {}
        if v[1]:
            d['sack'] = (int(v[1]), int(v[2]), parse_held(v[3]))
        if v[4]:
            d['place'] = (int(v[4]), int(v[5]), int(v[6], 16), int(v[7], 16), int(v[8]))
        out[int(v[0])] = d
    return out


def dump_decode(uroce, path):
    doc = json.loads(run([uroce, 'dump', '--json', path]))
    out = {}
    for fr in doc['files'][0]['frames']:
        d = {}
        if 'sack' in fr:
            d['sack'] = (fr['psn'], fr['sack']['bitmap_bytes'], [list(r) for r in fr['sack']['held']])
        if 'place' in fr:
            p = fr['place']
            d['place'] = (p['first_psn'], p['msg_len'], int(p['va'], 16), p['rkey'], p['recv_seq'])
        out[fr['frame']] = d
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--uroce', required=True)
    ap.add_argument('--tshark', required=True)
    ap.add_argument('--lua', required=True)
    ap.add_argument('--capture', action='append', default=[])
    a = ap.parse_args()
    bad = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'synthetic.pcap')
            frames, expected = synthetic()
            write_pcap(path, frames)
            lua, dump = lua_decode(a.tshark, a.lua, path), dump_decode(a.uroce, path)
            for i, want in enumerate(expected, 1):
                for name, got in (('lua', lua.get(i, {})), ('dump', dump.get(i, {}))):
                    if got != want:
                        print('synthetic frame %d: %s decodes %r, wrote %r' % (i, name, got, want))
                        bad += 1
            print('synthetic: %d frames, %d disagreements' % (len(frames), bad))
        for cap in a.capture:
            lua, dump = lua_decode(a.tshark, a.lua, cap), dump_decode(a.uroce, cap)
            n_sack = sum(1 for d in dump.values() if 'sack' in d)
            n_place = sum(1 for d in dump.values() if 'place' in d)
            diff = [k for k in sorted(set(lua) | set(dump)) if lua.get(k, {}) != dump.get(k, {})]
            for k in diff[:10]:
                print('%s frame %d: lua %r, dump %r' % (cap, k, lua.get(k), dump.get(k)))
            print('%s: %d frames, %d SACK blocks, %d placement headers, %d disagreements' %
                  (cap, len(dump), n_sack, n_place, len(diff)))
            bad += len(diff) + (n_sack == 0) + (n_place == 0)
    except RuntimeError as e:
        print(e)
        return 1
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
