#!/usr/bin/env python3
"""`uroce dump --verify` on CM MADs: decoded, and malformed ones fail the check.

The CM MADs of tests/data/rxe-rping-rdmacm.pcap (Linux rxe <-> rxe: an
independent implementation) are found here by this script's own parsing
(IPv4/UDP 4791, BTH opcode 0x64 UD SEND Only, DestQP 1, DETH, 256-byte MAD)
and their message named from the MAD's attribute ID (IBA 12.6, Table 100:
0x0010 REQ, 0x0013 REP, 0x0014 RTU, 0x0015 DREQ, 0x0016 DREP). Checked:

  - `uroce dump --json --verify` passes and names each MAD as this script does
    (and, where tshark is installed, as tshark's CM dissector does);
  - copies with one fault each, ICRC recomputed so that only the MAD is
    wrong, fail `--verify` with exactly one cm_malformed: a Q_Key other than
    the GSI's 0x80010000 (IBA 13.5.3), a REJ whose RejectedInfoLength is 100
    (more than the 72 bytes of ARI, 12.6.7), a REQ with class version 3 (the CM
    is class version 2, 13.4.4);
  - a LAP (attribute 0x0019) is a CM message uroce does not implement, not a
    malformed MAD: it is shown, and --verify still passes.

Usage: dump_cm_test.py UROCE_EXE DATA_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from explain_test import icrc, read_pcap  # noqa: E402  (the same independent ICRC and pcap reader)

NAMES = {0x10: "ConnectRequest", 0x13: "ConnectReply", 0x14: "ReadyToUse", 0x15: "DisconnectRequest",
         0x16: "DisconnectReply", 0x12: "ConnectReject"}
ETH, IP, UDP, BTH, DETH = 14, 20, 8, 12, 8
MAD_OFF = ETH + IP + UDP + BTH + DETH


def mad_frames(frames):
    """Indexes of the frames that are CM MADs: IPv4, UDP 4791, UD SEND Only to QP1, 256 bytes."""
    out = []
    for i, f in enumerate(frames):
        if len(f) < MAD_OFF + 256 + 4 or f[12:14] != b"\x08\x00" or f[ETH + 9] != 17:
            continue
        if struct.unpack_from(">H", f, ETH + IP + 2)[0] != 4791:
            continue
        bth = ETH + IP + UDP
        if f[bth] == 0x64 and struct.unpack_from(">I", f, bth + 4)[0] & 0xFFFFFF == 1:
            out.append(i)
    return out


def refresh_icrc(f):
    """The frame with its ICRC recomputed (IPv4 RoCEv2, no Ethernet padding after the ICRC)."""
    f = bytearray(f)
    end = ETH + struct.unpack_from(">H", f, ETH + 2)[0]  # IP total length
    f[end - 4:end] = icrc(bytes(f[ETH:ETH + IP]), bytes(f[ETH + IP:end - 4]))
    return bytes(f)


def write_pcap(path, frames):
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for f in frames:
            out.write(struct.pack("<IIII", 0, 0, len(f), len(f)))
            out.write(f)


def dump(uroce, path):
    r = subprocess.run([uroce, "dump", "--json", "--verify", path], capture_output=True, text=True, check=False)
    return r.returncode, json.loads(r.stdout)


def main():
    uroce, data = sys.argv[1], sys.argv[2]
    errors = []
    frames = read_pcap(os.path.join(data, "rxe-rping-rdmacm.pcap"))
    mads = mad_frames(frames)
    want = [NAMES.get(struct.unpack_from(">H", frames[i], MAD_OFF + 16)[0], "?") for i in mads]
    if want != ["ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest", "DisconnectReply"]:
        errors.append(f"the capture's MADs are not rping's exchange: {want}")
    with tempfile.TemporaryDirectory(prefix="uroce-dump-cm-") as d:
        good = os.path.join(d, "good.pcap")
        write_pcap(good, [frames[i] for i in mads])
        rc, j = dump(uroce, good)
        got = [f.get("cm", "").split(" ")[1] if f.get("cm") else None for f in j["files"][0]["frames"]]
        if rc != 0 or got != want or j["summary"]["cm_mads"] != 5 or j["summary"]["cm_malformed"] != 0:
            errors.append(f"rxe's MADs: exit {rc}, dump names {got}, want {want}, summary {j['summary']}")
        if shutil.which("tshark"):
            t = subprocess.run(["tshark", "-r", good, "-T", "fields", "-e", "_ws.col.Info"], capture_output=True,
                               text=True, check=False)
            names = [ln.strip().removeprefix("CM: ") for ln in t.stdout.splitlines() if ln.strip()]
            if names != want:
                errors.append(f"tshark names {names}, this script {want}")
        req, rep = frames[mads[0]], frames[mads[1]]
        faults = {}
        f = bytearray(req)
        f[ETH + IP + UDP + BTH:ETH + IP + UDP + BTH + 4] = struct.pack(">I", 0x80010001)  # DETH Q_Key
        faults["bad Q_Key"] = f
        f = bytearray(rep)
        struct.pack_into(">H", f, MAD_OFF + 16, 0x0012)  # REP -> REJ: the body's info byte now reads as
        f[MAD_OFF + 24 + 9] = 100 << 1                    # RejectedInfoLength (7 bits) = 100 > 72
        faults["REJ info length 100"] = f
        f = bytearray(req)
        f[MAD_OFF + 2] = 3  # ClassVersion
        faults["class version 3"] = f
        for name, fr in faults.items():
            path = os.path.join(d, "bad.pcap")
            write_pcap(path, [refresh_icrc(fr)])
            rc, j = dump(uroce, path)
            s, fr0 = j["summary"], j["files"][0]["frames"][0]
            if rc != 1 or s["cm_malformed"] != 1 or s["malformed"] != 0 or not fr0.get("icrc_ok"):
                errors.append(f"{name}: want --verify to fail on the MAD alone (exit 1, cm_malformed 1, "
                              f"ICRC ok): exit {rc}, summary {s}, frame {fr0}")
        f = bytearray(req)
        struct.pack_into(">H", f, MAD_OFF + 16, 0x0019)  # LAP
        path = os.path.join(d, "lap.pcap")
        write_pcap(path, [refresh_icrc(f)])
        rc, j = dump(uroce, path)
        cm = j["files"][0]["frames"][0].get("cm", "")
        if rc != 0 or j["summary"]["cm_mads"] != 1 or j["summary"]["cm_malformed"] != 0 or not cm:
            errors.append(f"LAP: want it shown and not malformed: exit {rc}, cm {cm!r}, summary {j['summary']}")
    for e in errors:
        print("FAIL", e)
    print("ok: rxe's CM MADs decoded, 3 malformed copies caught, a LAP passed" if not errors else
          f"{len(errors)} failure(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
