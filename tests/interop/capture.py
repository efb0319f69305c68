"""Captures of the interop tests (pcap files, as QEMU's filter-dump and `uroce --pcap` write
them): frames, RoCEv2 opcodes, the ICRC of every RoCEv2 frame (computed here, independently of
our encoder), and the out-of-band TCP payloads of the stock tools. Standard library only."""
from __future__ import annotations

import os
import socket
import struct
import zlib

OOB_PORT = 18515
ROCE_PORT = 4791


def read_pcap(path: str, window: tuple[int, int] | None = None):
    """The frames of a pcap file, read as a stream; with window = (first, last), only those
    captured in those seconds of the epoch (QEMU's filter-dump and `uroce --pcap` stamp frames
    with the host's clock), the others skipped unread."""
    with open(path, "rb") as f:
        head = f.read(24)
        if len(head) < 24:
            return
        magic = struct.unpack("<I", head[:4])[0]
        rec = struct.Struct(("<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">") + "IIII")
        while len(r := f.read(16)) == 16:
            sec, _frac, incl, _orig = rec.unpack(r)
            if window and not window[0] <= sec <= window[1]:
                f.seek(incl, 1)
                continue
            yield f.read(incl)


def drop_partial_record(path: str) -> int:
    """Cut a pcap file after its last whole record (a writer killed by SIGKILL leaves the frames
    its stdio buffer held unwritten, the last one cut short); returns the bytes dropped."""
    size = os.path.getsize(path)
    end = 24
    with open(path, "rb") as f:
        magic = struct.unpack("<I", f.read(4))[0]
        rec = struct.Struct(("<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">") + "IIII")
        f.seek(24)
        while len(r := f.read(16)) == 16:
            incl = rec.unpack(r)[2]
            if end + 16 + incl > size:
                break
            end += 16 + incl
            f.seek(end)
    if end < size:
        os.truncate(path, end)
    return size - end


def roce_icrc(frame: bytes) -> tuple[int, int] | None:
    """(computed, carried) ICRC of an Ethernet/IPv4|IPv6/UDP:4791 frame, or None."""
    et = struct.unpack("!H", frame[12:14])[0]
    l3 = frame[14:]
    if et == 0x0800:
        ihl = (l3[0] & 0x0F) * 4
        tot = struct.unpack("!H", l3[2:4])[0]
        if l3[9] != 17:
            return None
        ip = bytearray(l3[:ihl])
        ip[1] = 0xFF                 # TOS (DSCP+ECN)
        ip[8] = 0xFF                 # TTL
        ip[10:12] = b"\xff\xff"      # header checksum
        rest = l3[ihl:tot]
    elif et == 0x86DD:
        if l3[6] != 17:
            return None
        plen = struct.unpack("!H", l3[4:6])[0]
        ip = bytearray(l3[:40])
        ip[0] |= 0x0F                # traffic class (low nibble of byte 0 ...)
        ip[1] = 0xFF                 # ... + flow label
        ip[2:4] = b"\xff\xff"
        ip[7] = 0xFF                 # hop limit
        rest = l3[40:40 + plen]
    else:
        return None
    if len(rest) < 8 + 12 + 4 or struct.unpack("!H", rest[2:4])[0] != ROCE_PORT:
        return None
    udp = bytearray(rest[:8])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(rest[8:20])
    bth[4] = 0xFF                    # FECN/BECN/resv6a
    body = rest[20:-4]
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(bth) + body) & 0xFFFFFFFF
    carried = struct.unpack("<I", rest[-4:])[0]
    return crc, carried


def oob_messages(path: str) -> list[tuple[str, str, bytes]]:
    """TCP payloads on port 18515 (the ibv_*_pingpong / perftest out-of-band exchange)."""
    msgs = []
    for fr in read_pcap(path):
        if len(fr) < 34 or struct.unpack("!H", fr[12:14])[0] != 0x0800 or fr[23] != 6:
            continue
        ihl = (fr[14] & 0x0F) * 4
        tot = struct.unpack("!H", fr[16:18])[0]
        tcp = fr[14 + ihl:14 + tot]
        sp, dp = struct.unpack("!HH", tcp[:4])
        pay = tcp[(tcp[12] >> 4) * 4:]
        if OOB_PORT in (sp, dp) and pay:
            msgs.append((socket.inet_ntoa(fr[26:30]), socket.inet_ntoa(fr[30:34]), bytes(pay)))
    return msgs


def pcap_summary(path: str) -> dict:
    """Frames, RoCEv2 frames (by BTH opcode), ICRC check, TCP/18515 payload sizes."""
    s = {"frames": 0, "arp": 0, "roce": 0, "icrc_ok": 0, "icrc_bad": 0, "opcodes": {},
         "oob_payloads": [], "macs": set()}
    if not path or not os.path.exists(path):
        return s
    for fr in read_pcap(path):
        s["frames"] += 1
        if len(fr) < 14:
            continue
        s["macs"].add(":".join(f"{b:02x}" for b in fr[6:12]))
        et = struct.unpack("!H", fr[12:14])[0]
        if et == 0x0806:
            s["arp"] += 1
            continue
        r = roce_icrc(fr)
        if r is not None:
            s["roce"] += 1
            s["icrc_ok" if r[0] == r[1] else "icrc_bad"] += 1
            l4 = fr[14 + ((fr[14] & 0x0F) * 4 if et == 0x0800 else 40):]
            op = l4[8]
            s["opcodes"][f"0x{op:02x}"] = s["opcodes"].get(f"0x{op:02x}", 0) + 1
            continue
        if et == 0x0800 and fr[23] == 6:
            ihl = (fr[14] & 0x0F) * 4
            tot = struct.unpack("!H", fr[16:18])[0]
            tcp = fr[14 + ihl:14 + tot]
            sp, dp = struct.unpack("!HH", tcp[:4])
            doff = (tcp[12] >> 4) * 4
            if OOB_PORT in (sp, dp) and len(tcp) > doff:
                s["oob_payloads"].append(len(tcp) - doff)
    s["macs"] = sorted(s["macs"])
    return s
