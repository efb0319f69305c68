-- Wireshark/tshark post-dissector for uroce's negotiated RoCE extension
-- (selective repeat; docs/LOSS_RECOVERY.md "Wire format"). The packets are
-- ordinary RoCEv2 (UDP port 4791) and the InfiniBand dissector shows them as
-- such; this adds, as the protocol "uroce_sr":
--   the SACK block after the AETH of an RC Acknowledge (kind 1, reserved 0,
--   bitmap bytes, bitmap: bit i = PSN BTH.PSN + 1 + i is held), and
--   the placement header at the start of the payload of an RC SEND/WRITE
--   packet (magic 'S' | first PSN, message length, VA, R_Key, receive WQE
--   sequence number), recognised by its magic and a first PSN that fits the
--   opcode (a First/Only starts its message at its own PSN).
-- Use: tshark -X lua_script:tools/wireshark/uroce_sr.lua -r CAPTURE -T fields \
--        -e uroce_sr.sack.held -e uroce_sr.place.first_psn ...
-- Only RoCEv2 over IPv4/IPv6 (with or without one 802.1Q tag) is looked at.

local p = Proto("uroce_sr", "uroce selective repeat extension")

local f = {
  sack_cum = ProtoField.uint32("uroce_sr.sack.cum", "Cumulative PSN (BTH PSN)"),
  sack_kind = ProtoField.uint8("uroce_sr.sack.kind", "SACK kind"),
  sack_bytes = ProtoField.uint16("uroce_sr.sack.bitmap_bytes", "SACK bitmap bytes"),
  sack_held = ProtoField.string("uroce_sr.sack.held", "PSNs held past the cumulative point (runs)"),
  place_first = ProtoField.uint32("uroce_sr.place.first_psn", "Message first PSN"),
  place_len = ProtoField.uint32("uroce_sr.place.msg_len", "Message length"),
  place_va = ProtoField.uint64("uroce_sr.place.va", "Remote VA", base.HEX),
  place_rkey = ProtoField.uint32("uroce_sr.place.rkey", "R_Key", base.HEX),
  place_seq = ProtoField.uint32("uroce_sr.place.recv_seq", "Receive WQE sequence number"),
}
p.fields = f

-- RC request opcodes that carry SEND/WRITE data: header bytes after the BTH, and First/Only.
local data_ops = {
  [0x00] = {0, true}, [0x01] = {0, false}, [0x02] = {0, false}, [0x03] = {4, false},
  [0x04] = {0, true}, [0x05] = {4, true},
  [0x06] = {16, true}, [0x07] = {0, false}, [0x08] = {0, false}, [0x09] = {4, false},
  [0x0a] = {16, true}, [0x0b] = {20, true},
  [0x16] = {4, false}, [0x17] = {4, true},
}
local kAck = 0x11

-- Offset of the UDP payload (the BTH) of a RoCEv2 frame, or nil.
local function bth_offset(tvb)
  if tvb:len() < 14 then return nil end
  local off = 12
  local et = tvb(off, 2):uint()
  if et == 0x8100 then
    off = off + 4
    et = tvb(off, 2):uint()
  end
  off = off + 2
  local udp
  if et == 0x0800 then
    if tvb:len() < off + 20 or tvb(off + 9, 1):uint() ~= 17 then return nil end
    udp = off + (tvb(off, 1):uint() % 16) * 4
  elseif et == 0x86dd then
    if tvb:len() < off + 40 or tvb(off + 6, 1):uint() ~= 17 then return nil end
    udp = off + 40
  else
    return nil
  end
  if tvb:len() < udp + 8 + 12 + 4 or tvb(udp + 2, 2):uint() ~= 4791 then return nil end
  return udp + 8, udp + tvb(udp + 4, 2):uint()  -- the BTH, the end of the UDP datagram
end

local function psn_add(a, n) return (a + n) % 0x1000000 end

function p.dissector(tvb, pinfo, tree)
  local bth, udp_end = bth_offset(tvb)
  if not bth then return end
  local opcode = tvb(bth, 1):uint()
  local pad = math.floor(tvb(bth + 1, 1):uint() / 16) % 4
  local psn = tvb(bth + 8, 4):uint() % 0x1000000
  local body_end = udp_end - 4 - pad  -- before pad and ICRC
  if opcode == kAck then
    local off = bth + 12 + 4
    if body_end - off < 8 then return end
    local nbytes = tvb(off + 2, 2):uint()
    if tvb(off, 1):uint() ~= 1 or tvb(off + 1, 1):uint() ~= 0 or off + 4 + nbytes ~= body_end then return end
    local t = tree:add(p, tvb(off, 4 + nbytes), "uroce SACK")
    t:add(f.sack_cum, tvb(bth + 8, 4), psn)
    t:add(f.sack_kind, tvb(off, 1))
    t:add(f.sack_bytes, tvb(off + 2, 2))
    local runs, lo, hi = {}, nil, nil
    for i = 1, nbytes * 8 - 1 do
      local byte = tvb(off + 4 + math.floor(i / 8), 1):uint()
      if math.floor(byte / 2 ^ (i % 8)) % 2 == 1 then
        local q = psn_add(psn, 1 + i)
        if hi and psn_add(hi, 1) == q then
          hi = q
        else
          if lo then runs[#runs + 1] = (lo == hi) and tostring(lo) or (lo .. "-" .. hi) end
          lo, hi = q, q
        end
      end
    end
    if lo then runs[#runs + 1] = (lo == hi) and tostring(lo) or (lo .. "-" .. hi) end
    t:add(f.sack_held, tvb(off + 4, nbytes), table.concat(runs, ","))
    return
  end
  local op = data_ops[opcode]
  if not op then return end
  local off = bth + 12 + op[1]
  if body_end - off < 24 then return end
  local word = tvb(off, 4):uint()
  if math.floor(word / 0x1000000) ~= 0x53 then return end
  local first = word % 0x1000000
  local before = ((psn - first) % 0x1000000) < 0x800000 and psn ~= first
  if op[2] then
    if first ~= psn then return end
  elseif not before then
    return
  end
  local t = tree:add(p, tvb(off, 24), "uroce placement header")
  t:add(f.place_first, tvb(off, 4), first)
  t:add(f.place_len, tvb(off + 4, 4))
  t:add(f.place_va, tvb(off + 8, 8))
  t:add(f.place_rkey, tvb(off + 16, 4))
  t:add(f.place_seq, tvb(off + 20, 4))
end

register_postdissector(p)
