#!/usr/bin/env python3
"""Cross-check `uroce dump --json` against tshark's InfiniBand dissector.

For every pcap given (or every *.pcap in --data-dir), runs
  uroce dump --json FILE
  tshark -r FILE -d udp.port==4791,infiniband -T fields -e ...
and compares, on every RoCE frame, each field both decode: BTH (opcode, SE,
MigReq, pad, TVer, P_Key, dest QP, AckReq, PSN, FECN/BECN byte), the opcode name
(tshark's Info column), IP DSCP/ECN, UDP source port, frame length, payload
length, every extension header present (DETH Q_Key/SrcQP, RETH VA/R_Key/DMA
length, AtomicETH VA/R_Key/swap/compare, AETH syndrome and its decoded
type/credit/timer/error code, MSN, AtomicAckETH original data, ImmDt, IETH)
and the ICRC value carried. A header that one side shows and the other does
not is a disagreement too. tshark does not verify the ICRC; uroce does, and
this script also requires icrc_ok on every frame of a bundled capture.

Exit status: 0 if every field of every frame agrees and at least one frame was
compared; 1 on any disagreement, a tool failure, or zero frames compared;
2 on a usage error.
"""
import argparse
import glob
import ipaddress
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

# tshark fields, in the order of its tab-separated output.
FIELDS = [
    'frame.number', 'frame.len', '_ws.col.Info',
    'ip.dsfield.dscp', 'ip.dsfield.ecn', 'ipv6.tclass.dscp', 'ipv6.tclass.ecn', 'udp.srcport',
    'vlan.id', 'vlan.priority', 'ip.src', 'ip.dst', 'ip.ttl', 'ipv6.src', 'ipv6.dst', 'ipv6.hlim',
    'ipv6.flow', 'infiniband.grh.tclass', 'infiniband.grh.flowlabel', 'infiniband.grh.hoplmt',
    'infiniband.grh.sgid', 'infiniband.grh.dgid',
    'infiniband.bth.opcode', 'infiniband.bth.se', 'infiniband.bth.m',
    'infiniband.bth.padcnt', 'infiniband.bth.tver', 'infiniband.bth.p_key',
    'infiniband.reserved', 'infiniband.bth.destqp', 'infiniband.bth.a',
    'infiniband.bth.psn',
    'infiniband.deth.q_key', 'infiniband.deth.srcqp',
    'infiniband.reth.va', 'infiniband.reth.r_key', 'infiniband.reth.dmalen',
    'infiniband.atomiceth.swapdt', 'infiniband.atomiceth.cmpdt',
    'infiniband.aeth.syndrome', 'infiniband.aeth.syndrome.opcode',
    'infiniband.aeth.syndrome.credit_count', 'infiniband.aeth.syndrome.timer',
    'infiniband.aeth.syndrome.error_code', 'infiniband.aeth.msn',
    'infiniband.atomicacketh.origremdt',
    'infiniband.immdt', 'infiniband.ieth',
    'infiniband.invariant.crc',
    'data.len',
]

AETH_TYPES = {'ack': 0, 'rnr_nak': 1, 'reserved': 2, 'nak': 3}

# Protocols tshark tries heuristically on InfiniBand payloads (tshark -G
# heuristic-decodes, table infiniband.payload); disabled so that the payload
# stays "data" and its length is shown (payload bytes can otherwise be taken
# for RPC-over-RDMA and the like).
# (tshark 4.0 takes one protocol per --disable-protocol.)
PAYLOAD_PROTOCOLS = ['smc', 'smb_direct', 'rpcordma', 'nvme-rdma', 'lnet', 'iser', 'eoib', 'infiniband_sdp',
                     'fcoib']



def num(s):
    """A tshark field value (decimal, 0x-hex, boolean) as an int; None if absent."""
    if s is None or s == '':
        return None
    if s in ('True', 'False'):
        return int(s == 'True')
    return int(s, 0)


def byte_num(s):
    """An FT_BYTES value ("11:22:33:44" or "11223344") as a big-endian int."""
    if s is None or s == '':
        return None
    return int(s.replace(':', ''), 16)


def hex_num(s):
    """A uroce 64-bit "0x..." string (or a plain JSON number) as an int."""
    if s is None:
        return None
    return int(s, 16) if isinstance(s, str) else int(s)


def bswap32(v):
    return int.from_bytes(v.to_bytes(4, 'little'), 'big')


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    return p.returncode, p.stdout.decode('utf-8', 'replace'), p.stderr.decode('utf-8', 'replace')


def tshark_frames(tshark, path):
    cmd = [tshark, '-n', '-r', path, '-d', 'udp.port==4791,infiniband', '-Y', 'infiniband.bth',
           '-T', 'fields', '-E', 'separator=/t', '-E', 'occurrence=f', '-E', 'quote=n']
    for proto in PAYLOAD_PROTOCOLS:
        cmd += ['--disable-protocol', proto]
    for f in FIELDS:
        cmd += ['-e', f]
    rc, out, err = run(cmd)
    if rc != 0:
        raise RuntimeError(f'tshark failed on {path} (exit {rc}): {err.strip()[-500:]}')
    frames = {}
    for line in out.splitlines():
        vals = line.split('\t')
        if len(vals) != len(FIELDS):
            raise RuntimeError(f'tshark printed {len(vals)} fields, expected {len(FIELDS)}: {line!r}')
        row = dict(zip(FIELDS, vals))
        frames[int(row['frame.number'])] = row
    return frames


def uroce_frames(uroce, path):
    rc, out, err = run([uroce, 'dump', '--json', path])
    if rc != 0:
        raise RuntimeError(f'uroce dump failed on {path} (exit {rc}): {err.strip()[-500:]}')
    doc = json.loads(out)
    (f,) = doc['files']
    if 'error' in f:
        raise RuntimeError(f'uroce dump could not read {path}: {f["error"]}')
    return {fr['frame']: fr for fr in f['frames']}


# ---- synthetic frames: one per opcode, built here by hand ----
# The captures hold no IETH, CNP, UD-with-immediate or UC WRITE frames, no
# IPv6, RoCEv1 or 802.1Q, no ECN, FECN or BECN marks, no ACK credits and no
# NAK codes 1 and 3; these frames, written with struct and zlib (sharing no
# code with uroce), let tshark check those decodes too.

# IBA Table 38 (+ A17.9.2 CNP): extension headers after the BTH.
TABLE38 = {}
for _base in (0x00, 0x20):
    TABLE38.update({_base + 0x00: [], _base + 0x01: [], _base + 0x02: [], _base + 0x03: ['imm'],
                    _base + 0x04: [], _base + 0x05: ['imm'], _base + 0x06: ['reth'], _base + 0x07: [],
                    _base + 0x08: [], _base + 0x09: ['imm'], _base + 0x0a: ['reth'],
                    _base + 0x0b: ['reth', 'imm']})
TABLE38.update({0x0c: ['reth'], 0x0d: ['aeth'], 0x0e: [], 0x0f: ['aeth'], 0x10: ['aeth'],
                0x11: ['aeth'], 0x12: ['aeth', 'atomicack'], 0x13: ['atomic'], 0x14: ['atomic'],
                0x16: ['ieth'], 0x17: ['ieth'], 0x64: ['deth'], 0x65: ['deth', 'imm'], 0x81: ['cnp']})
NO_PAYLOAD = {0x0c, 0x11, 0x12, 0x13, 0x14, 0x81}
AETH_SYNDROMES = [0x1f, 0x05, 0x2e, 0x20, 0x60, 0x61, 0x62, 0x63]


def ipv4_checksum(h):
    s = sum(struct.unpack('!10H', h))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def icrc(l3, kind):
    """zlib ICRC over the masked headers (A17.3.3), l3 = IP header .. last byte before the ICRC."""
    b = bytearray(l3)
    if kind == 'ipv4':
        b[1] = b[8] = 0xff
        b[10:12] = b'\xff\xff'
        udp = 20
    else:
        b[0] |= 0x0f
        b[1:4] = b'\xff\xff\xff'
        b[7] = 0xff
        udp = 40
    if kind != 'grh':
        b[udp + 6:udp + 8] = b'\xff\xff'
        bth = udp + 8
    else:
        bth = 40
    b[bth + 4] = 0xff
    return struct.pack('<I', zlib.crc32(b'\xff' * 8 + bytes(b)))


def synthetic_frame(i, opcode, kind, vlan):
    hdrs = TABLE38[opcode]
    plen = 0 if opcode in NO_PAYLOAD else (i * 7) % 61
    pad = (4 - plen % 4) % 4
    ext = b''
    for h in hdrs:
        if h == 'deth':
            ext += struct.pack('!II', 0x11111111 + i, 0x000011 + i)
        elif h == 'reth':
            ext += struct.pack('!QII', 0x0000557485801000 + i * 0x40, 0x204 + i, plen + 4096 * i)
        elif h == 'atomic':
            ext += struct.pack('!QIQQ', 0x00007f0011223340 + 8 * i, 0x305 + i, 0x0102030405060708 * (i + 1),
                               0xfedcba9876543210 - i)
        elif h == 'aeth':
            ext += struct.pack('!I', AETH_SYNDROMES[i % len(AETH_SYNDROMES)] << 24 | (0xfffff0 + i) & 0xffffff)
        elif h == 'atomicack':
            ext += struct.pack('!Q', 0x35313f3855f62652 + i)
        elif h == 'imm':
            ext += struct.pack('!I', 0xddeeff00 + i)
        elif h == 'ieth':
            ext += struct.pack('!I', 0x4242 + i)
        elif h == 'cnp':
            ext += bytes(16)
    bth = struct.pack('!BBHBBHI', opcode, (0x80 if i % 2 else 0) | pad << 4, 0x8001 + i,
                      (0x80 if i % 3 == 0 else 0) | (0x40 if i % 5 == 0 else 0), (0x12 + i) & 0xff,
                      0x3456 + i, (0x80000000 if i % 2 == 0 else 0) | (0xfffff8 + i) & 0xffffff)
    body = bth + ext + bytes((0xa0 + k) & 0xff for k in range(plen)) + bytes(pad)
    tclass = (26 << 2) | (i % 4)  # DSCP 26 with every ECN codepoint in turn
    l4 = body if kind == 'grh' else struct.pack('!HHHH', 0xc000 + i, 4791, 8 + len(body) + 4, 0) + body
    return roce_frame(l4, kind, vlan, tclass, i)


def roce_frame(l4, kind, vlan, tclass=0, i=0):
    """A whole frame around l4 (UDP header and BTH on, or the BTH on for 'grh'): the IP header of
    kind (ipv4, ipv6, or grh for RoCEv1) with traffic class tclass and identification / flow
    label from i, Ethernet (802.1Q-tagged if vlan), the ICRC, padding to 60 bytes."""
    if kind == 'ipv4':
        ip = bytearray(struct.pack('!BBHHHBBH4s4s', 0x45, tclass, 20 + len(l4) + 4, i, 0x4000, 64, 17, 0,
                                   bytes([10, 50, 0, 2]), bytes([10, 50, 0, 1])))
        ip[10:12] = struct.pack('!H', ipv4_checksum(bytes(ip)))
        ethertype = 0x0800
    else:
        ip = struct.pack('!IHBB16s16s', 6 << 28 | tclass << 20 | (0x12345 + i), len(l4) + 4,
                         17 if kind == 'ipv6' else 0x1b, 64,
                         bytes(range(0x20, 0x30)), bytes(range(0xf0, 0x100)))
        ethertype = 0x86dd if kind == 'ipv6' else 0x8915
    l3 = bytes(ip) + l4
    eth = bytes([0x52, 0x54, 0, 0x50, 0, 1, 0x52, 0x54, 0, 0x50, 0, 2])
    if vlan:
        eth += struct.pack('!HH', 0x8100, 0x6005)
    frame = eth + struct.pack('!H', ethertype) + l3 + icrc(l3, kind)
    return frame + bytes(max(0, 60 - len(frame)))


def write_synthetic_pcap(path):
    """Every Table 38 opcode over IPv4, IPv6, RoCEv1 (GRH) and 802.1Q-tagged IPv4; returns the count."""
    frames = []
    for kind, vlan in (('ipv4', False), ('ipv6', False), ('grh', False), ('ipv4', True)):
        for opcode in sorted(TABLE38):
            frames.append(synthetic_frame(len(frames), opcode, kind, vlan))
    with open(path, 'wb') as f:
        f.write(struct.pack('<IHHiIII', 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for n, fr in enumerate(frames):
            f.write(struct.pack('<IIII', 1_700_000_000, n, len(fr), len(fr)) + fr)
    return len(frames)


def pairs(ours, t):
    """(field, uroce value, tshark value) for every field to compare on one frame."""
    p = [
        ('frame length', ours['len'], num(t['frame.len'])),
        ('opcode', ours['opcode'], num(t['infiniband.bth.opcode'])),
        ('SE', int(ours['se']), num(t['infiniband.bth.se'])),
        ('MigReq', int(ours['mig']), num(t['infiniband.bth.m'])),
        ('PadCnt', ours['pad'], num(t['infiniband.bth.padcnt'])),
        ('TVer', ours['tver'], num(t['infiniband.bth.tver'])),
        ('P_Key', ours['pkey'], num(t['infiniband.bth.p_key'])),
        ('FECN/BECN byte', (ours['fecn'] << 7) | (ours['becn'] << 6),
         byte_num(t['infiniband.reserved']) & 0xc0 if t['infiniband.reserved'] else None),
        ('DestQP', ours['qpn'], num(t['infiniband.bth.destqp'])),
        ('AckReq', int(ours['ack_req']), num(t['infiniband.bth.a'])),
        ('PSN', ours['psn'], num(t['infiniband.bth.psn'])),
    ]
    def addr(v):
        return str(ipaddress.ip_address(v)) if v else None

    tc = ours['dscp'] << 2 | ours['ecn']
    if ours['l3'] == 'ipv4':
        p += [('IPv4 DSCP', ours['dscp'], num(t['ip.dsfield.dscp'])),
              ('IPv4 ECN', ours['ecn'], num(t['ip.dsfield.ecn'])),
              ('IPv4 TTL', ours['hop_limit'], num(t['ip.ttl'])),
              ('IPv4 source', addr(ours['src']), addr(t['ip.src'])),
              ('IPv4 destination', addr(ours['dst']), addr(t['ip.dst']))]
    elif ours['l3'] == 'ipv6':
        p += [('IPv6 DSCP', ours['dscp'], num(t['ipv6.tclass.dscp'])),
              ('IPv6 ECN', ours['ecn'], num(t['ipv6.tclass.ecn'])),
              ('IPv6 hop limit', ours['hop_limit'], num(t['ipv6.hlim'])),
              ('IPv6 flow label', ours['flow_label'], num(t['ipv6.flow'])),
              ('IPv6 source', addr(ours['src']), addr(t['ipv6.src'])),
              ('IPv6 destination', addr(ours['dst']), addr(t['ipv6.dst']))]
    else:
        p += [('GRH TClass', tc, num(t['infiniband.grh.tclass'])),
              ('GRH HopLmt', ours['hop_limit'], num(t['infiniband.grh.hoplmt'])),
              ('GRH FlowLabel', ours['flow_label'], num(t['infiniband.grh.flowlabel'])),
              ('GRH SGID', addr(ours['src']), addr(t['infiniband.grh.sgid'])),
              ('GRH DGID', addr(ours['dst']), addr(t['infiniband.grh.dgid']))]
    if ours['l3'] != 'grh':
        p.append(('UDP source port', ours['udp_sport'], num(t['udp.srcport'])))
    p.append(('802.1Q TCI', ours.get('vlan'), num(t['vlan.id']) | num(t['vlan.priority']) << 13
              if t['vlan.id'] else None))

    # Opcode name: tshark's Info column starts with it for transport packets
    # ("RC Send Only QP=0x000011"; "UC RDMA Write FirstQP=..." lacks the space);
    # MADs on QP1 show the MAD instead ("CM: ..."). tshark 4.0 does not know
    # CNP (0x81): it calls it "Unknown OpCode" and decodes nothing after the
    # BTH, so for CNP only the BTH fields above are compared.
    info = t['_ws.col.Info']
    name = info.split('QP=')[0].strip() if 'QP=' in info else None
    if ours['opcode'] == 0x81 and name == 'Unknown OpCode':
        return p
    if name is not None:
        p.append(('opcode name', ours['opcode_name'], name))
    p.append(('ICRC', bswap32(ours['icrc']), num(t['infiniband.invariant.crc'])))

    # Payload: tshark shows undissected payload + pad as data.len; QP1 MADs are
    # dissected as MADs instead, so there is nothing to compare for them.
    body = ours['payload_len'] + ours['pad']
    if t['data.len'] or (body and ours['qpn'] != 1):
        p.append(('payload+pad bytes', body, num(t['data.len'])))

    deth = ours.get('deth')
    if deth or t['infiniband.deth.q_key']:
        deth = deth or {}
        p += [('DETH Q_Key', deth.get('qkey'), num(t['infiniband.deth.q_key'])),
              ('DETH SrcQP', deth.get('src_qp'), num(t['infiniband.deth.srcqp']))]

    # tshark puts the AtomicETH VA and R_Key under the RETH field names.
    reth = ours.get('reth')
    atomic = ours.get('atomic_eth')
    if reth or atomic or t['infiniband.reth.va']:
        src = reth or atomic or {}
        p += [('RETH/AtomicETH VA', hex_num(src.get('va')), num(t['infiniband.reth.va'])),
              ('RETH/AtomicETH R_Key', src.get('rkey'), num(t['infiniband.reth.r_key']))]
        if reth or not atomic:
            p.append(('RETH DMA length', (reth or {}).get('len'), num(t['infiniband.reth.dmalen'])))
    if atomic or t['infiniband.atomiceth.swapdt']:
        atomic = atomic or {}
        p += [('AtomicETH swap/add', hex_num(atomic.get('swap_add')), num(t['infiniband.atomiceth.swapdt'])),
              ('AtomicETH compare', hex_num(atomic.get('compare')), num(t['infiniband.atomiceth.cmpdt']))]

    aeth = ours.get('aeth')
    if aeth or t['infiniband.aeth.syndrome']:
        aeth = aeth or {}
        p += [('AETH syndrome', aeth.get('syndrome'), num(t['infiniband.aeth.syndrome'])),
              ('AETH type', AETH_TYPES.get(aeth.get('type')), num(t['infiniband.aeth.syndrome.opcode'])),
              ('AETH MSN', aeth.get('msn'), num(t['infiniband.aeth.msn']))]
        kind = aeth.get('type')
        if kind == 'ack':
            p.append(('AETH credit code', aeth.get('credit_code'),
                      num(t['infiniband.aeth.syndrome.credit_count'])))
        elif kind == 'rnr_nak':
            p.append(('AETH RNR timer', aeth.get('rnr_timer'), num(t['infiniband.aeth.syndrome.timer'])))
        elif kind == 'nak':
            p.append(('AETH NAK code', aeth.get('nak_code'), num(t['infiniband.aeth.syndrome.error_code'])))

    ack = ours.get('atomic_ack_eth')
    if ack or t['infiniband.atomicacketh.origremdt']:
        p.append(('AtomicAckETH orig', hex_num((ack or {}).get('orig')),
                  num(t['infiniband.atomicacketh.origremdt'])))
    if 'imm_dt' in ours or t['infiniband.immdt']:
        p.append(('ImmDt', ours.get('imm_dt'), byte_num(t['infiniband.immdt'])))
    if 'ieth' in ours or t['infiniband.ieth']:
        p.append(('IETH R_Key', (ours.get('ieth') or {}).get('rkey'), byte_num(t['infiniband.ieth'])))
    return p


def compare_file(uroce, tshark, path, report):
    ours = uroce_frames(uroce, path)
    theirs = tshark_frames(tshark, path)
    frames = fields = bad = 0
    name = os.path.basename(path)
    for n in sorted(set(ours) | set(theirs)):
        if n not in theirs:
            report(f'{name} frame {n}: uroce shows a RoCE frame, tshark does not')
            bad += 1
            continue
        if n not in ours:
            report(f'{name} frame {n}: tshark shows a RoCE frame, uroce does not')
            bad += 1
            continue
        o = ours[n]
        if o['status'] != 'ok':
            report(f'{name} frame {n}: uroce status {o["status"]} on a bundled capture')
            bad += 1
            continue
        frames += 1
        for field, a, b in pairs(o, theirs[n]):
            fields += 1
            if a != b:
                bad += 1
                report(f'{name} frame {n}: {field}: uroce {a!r}, tshark {b!r}')
    return frames, fields, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--uroce', required=True, help='path of the built uroce binary')
    ap.add_argument('--tshark', default='tshark', help='tshark to run (default: tshark on PATH)')
    ap.add_argument('--data-dir', help='compare every *.pcap in this directory')
    ap.add_argument('--synthetic', action='store_true',
                    help='also compare a pcap of every Table 38 opcode over IPv4, IPv6, RoCEv1 and 802.1Q, '
                         'built by this script')
    ap.add_argument('--max-report', type=int, default=50, help='disagreements to print (default 50)')
    ap.add_argument('pcaps', nargs='*', help='pcap files to compare')
    a = ap.parse_args()
    paths = list(a.pcaps)
    if a.data_dir:
        paths += sorted(glob.glob(os.path.join(a.data_dir, '*.pcap')))
    tmp = None
    if a.synthetic:
        tmp = tempfile.TemporaryDirectory(prefix='tshark-compare-')
        syn = os.path.join(tmp.name, 'synthetic-every-opcode.pcap')
        write_synthetic_pcap(syn)
        paths.append(syn)
    if not paths:
        ap.error('no pcap files given')

    printed = [0]

    def report(msg):
        printed[0] += 1
        if printed[0] <= a.max_report:
            print('  DISAGREE ' + msg)

    total = [0, 0, 0]
    failed = False
    for path in paths:
        try:
            frames, fields, bad = compare_file(a.uroce, a.tshark, path, report)
        except (RuntimeError, ValueError, KeyError) as e:
            print(f'{path}: ERROR {e}')
            failed = True
            continue
        print(f'{os.path.basename(path)}: {frames} RoCE frames, {fields} fields compared, {bad} disagreements')
        total = [total[0] + frames, total[1] + fields, total[2] + bad]
    print(f'total: {len(paths)} files, {total[0]} RoCE frames, {total[1]} fields compared, '
          f'{total[2]} disagreements')
    if total[0] == 0:
        print('FAIL: compared zero frames')
        return 1
    if failed or total[2]:
        print('FAIL')
        return 1
    print('OK: uroce dump and tshark agree on every field')
    return 0


if __name__ == '__main__':
    sys.exit(main())
