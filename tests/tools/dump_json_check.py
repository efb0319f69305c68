#!/usr/bin/env python3
"""Check that `uroce dump --json` writes well-formed JSON with the documented fields.

Runs `uroce dump --json` on the given pcaps (or every *.pcap in --data-dir),
parses the output with Python's json module and checks:
  - the top level is {"files": [...], "summary": {...}} with one entry per file;
  - every frame object has frame, len, status and, when decoded, every BTH field
    listed in `uroce dump --help`, 64-bit fields as "0x" + 16 hex digits;
  - the extension-header objects match the opcode (RETH on RDMA WRITE First /
    Only and READ Request, AETH on ACKs and READ responses, ...);
  - each summary adds up (roce = icrc_ok + icrc_bad + malformed,
    frames = roce + not_roce, per-reason and per-opcode counts sum to the totals)
    and the total summary is the sum of the file summaries;
  - with --expect-clean, every frame decodes with a good ICRC.
Needs no tshark, so it runs everywhere. Exit 0 if all holds, 1 otherwise.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

BTH_FIELDS = ['l3', 'src', 'dst', 'dscp', 'ecn', 'hop_limit', 'opcode', 'opcode_name', 'se', 'mig', 'pad',
              'tver', 'pkey', 'fecn', 'becn', 'qpn', 'ack_req', 'psn', 'payload_len', 'icrc', 'icrc_ok']
HEX64 = re.compile(r'^0x[0-9a-f]{16}$')

# Which extension headers each opcode carries (IBA Table 38; A17.9.2 CNP).
EXT = {}
for base in (0x00, 0x20):
    EXT.update({base + 3: {'imm_dt'}, base + 5: {'imm_dt'}, base + 6: {'reth'}, base + 9: {'imm_dt'},
                base + 10: {'reth'}, base + 11: {'reth', 'imm_dt'}})
EXT.update({0x0c: {'reth'}, 0x0d: {'aeth'}, 0x0f: {'aeth'}, 0x10: {'aeth'}, 0x11: {'aeth'},
            0x12: {'aeth', 'atomic_ack_eth'}, 0x13: {'atomic_eth'}, 0x14: {'atomic_eth'},
            0x16: {'ieth'}, 0x17: {'ieth'}, 0x64: {'deth'}, 0x65: {'deth', 'imm_dt'}})
ALL_EXT = {'deth', 'reth', 'atomic_eth', 'aeth', 'atomic_ack_eth', 'imm_dt', 'ieth'}
SUMMARY_KEYS = ['frames', 'roce', 'icrc_ok', 'icrc_bad', 'malformed', 'not_roce', 'malformed_by_reason',
                'not_roce_by_reason', 'opcodes']


def check_frame(fr, clean, err):
    for k in ('frame', 'len', 'status'):
        if k not in fr:
            err(f'frame without {k}: {fr}')
            return
    where = f'frame {fr["frame"]}'
    if fr['status'] not in ('ok', 'bad_icrc'):
        if clean:
            err(f'{where}: status {fr["status"]}')
        return
    if clean and fr['status'] != 'ok':
        err(f'{where}: status {fr["status"]}')
    for k in BTH_FIELDS:
        if k not in fr:
            err(f'{where}: missing {k}')
    if fr.get('icrc_ok') != (fr['status'] == 'ok'):
        err(f'{where}: icrc_ok {fr.get("icrc_ok")} with status {fr["status"]}')
    want = EXT.get(fr.get('opcode'), set())
    have = {k for k in ALL_EXT if k in fr}
    if want != have:
        err(f'{where}: opcode {fr.get("opcode")} has headers {sorted(have)}, expected {sorted(want)}')
    for obj, key in (('reth', 'va'), ('atomic_eth', 'va'), ('atomic_eth', 'swap_add'),
                     ('atomic_eth', 'compare'), ('atomic_ack_eth', 'orig')):
        if obj in fr and not HEX64.match(str(fr[obj].get(key))):
            err(f'{where}: {obj}.{key} is not a 0x-prefixed 16-digit hex string: {fr[obj].get(key)!r}')
    aeth = fr.get('aeth')
    if aeth is not None:
        kind = ['ack', 'rnr_nak', 'reserved', 'nak'][aeth['syndrome'] >> 5]
        if aeth.get('type') != kind:
            err(f'{where}: AETH syndrome {aeth["syndrome"]:#x} typed {aeth.get("type")}')


def check_summary(s, frames, err, what):
    for k in SUMMARY_KEYS:
        if k not in s:
            err(f'{what}: summary without {k}')
            return
    if s['roce'] != s['icrc_ok'] + s['icrc_bad'] + s['malformed']:
        err(f'{what}: roce != icrc_ok + icrc_bad + malformed')
    if s['frames'] != s['roce'] + s['not_roce']:
        err(f'{what}: frames != roce + not_roce')
    if sum(s['malformed_by_reason'].values()) != s['malformed']:
        err(f'{what}: malformed_by_reason does not add up')
    if sum(s['not_roce_by_reason'].values()) != s['not_roce']:
        err(f'{what}: not_roce_by_reason does not add up')
    if sum(s['opcodes'].values()) != s['icrc_ok'] + s['icrc_bad']:
        err(f'{what}: opcodes do not add up to the decoded frames')
    if frames is not None and len(frames) != s['roce']:
        err(f'{what}: {len(frames)} frame objects for {s["roce"]} RoCE frames')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--uroce', required=True)
    ap.add_argument('--data-dir')
    ap.add_argument('--expect-clean', action='store_true', help='every frame must decode with a good ICRC')
    ap.add_argument('pcaps', nargs='*')
    a = ap.parse_args()
    paths = list(a.pcaps) + (sorted(glob.glob(os.path.join(a.data_dir, '*.pcap'))) if a.data_dir else [])
    if not paths:
        ap.error('no pcap files given')
    p = subprocess.run([a.uroce, 'dump', '--json'] + paths, stdout=subprocess.PIPE, check=False)
    errors = []
    err = errors.append
    try:
        doc = json.loads(p.stdout)
    except ValueError as e:
        print(f'FAIL: uroce dump --json wrote invalid JSON: {e}')
        return 1
    if p.returncode != 0:
        err(f'uroce dump exited {p.returncode}')
    files = doc.get('files', [])
    if [f.get('file') for f in files] != paths:
        err('the files array does not list the pcaps in order')
    total = {k: 0 for k in SUMMARY_KEYS[:6]}
    nframes = 0
    for f in files:
        if 'error' in f:
            err(f'{f["file"]}: {f["error"]}')
            continue
        for fr in f['frames']:
            check_frame(fr, a.expect_clean, lambda m, name=f['file']: err(f'{os.path.basename(name)} {m}'))
        check_summary(f['summary'], f['frames'], err, f['file'])
        for k in total:
            total[k] += f['summary'].get(k, 0)
        nframes += len(f['frames'])
    check_summary(doc.get('summary', {}), None, err, 'total')
    for k, v in total.items():
        if doc.get('summary', {}).get(k) != v:
            err(f'total summary {k} {doc.get("summary", {}).get(k)} is not the sum over files, {v}')
    for e in errors[:50]:
        print('  ' + e)
    print(f'{len(paths)} files, {nframes} RoCE frames checked, {len(errors)} problems')
    if nframes == 0:
        print('FAIL: no frames checked')
        return 1
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
