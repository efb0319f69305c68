// `uroce dump`: decodes the RoCE frames of classic pcap files, one line (or one
// JSON object) per frame with every BTH and extension-header field (IBA 9.2-9.3),
// checks each ICRC (IBA 7.8.1, A17.3.3) and ends with a summary. Frames are
// parsed with ICRC checking off and the ICRC is recomputed separately, so a
// frame with a bad ICRC is still decoded and shown as icrc=bad. Frames of other
// protocols (ARP, TCP, UDP to other ports) are counted and skipped; malformed
// RoCE frames are shown with the parser's reason. Exit codes: 0 done, 1 a file
// could not be read or (--verify) a RoCE frame failed, 2 usage error.
#include <arpa/inet.h>

#include <array>
#include <map>
#include <optional>
#include <tuple>
#include <vector>
#include <cstdarg>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

#include "apps/commands.h"
#include "apps/common/args.h"
#include "apps/common/json_writer.h"
#include "stack/cm/describe.h"
#include "stack/cm/mad.h"
#include "stack/wire/aeth.h"
#include "stack/wire/ext_headers.h"
#include "stack/wire/headers.h"
#include "stack/wire/icrc.h"
#include "stack/wire/opcodes.h"
#include "stack/wire/packet.h"
#include "stack/wire/pcap.h"
#include "stack/wire/psn.h"

namespace uroce::apps {
namespace {

constexpr OptSpec kDumpOptions[] = {
    {.name = "verify", .help = "exit 1 if any RoCE frame is malformed or has a bad ICRC"},
    {.name = "json", .help = "write JSON (fields below) instead of text lines"},
    {.name = "explain", .short_name = 'e', .help = "after each frame, say in plain words what it does and how the receiver must answer (IBA 9.7); JSON: an \"explain\" field"},
    {.name = "mtu", .kind = OptKind::kUint, .def = "1024", .help = "path MTU the capture used, for --explain's READ response PSN ranges", .min = 256, .max = 4096},
};

// The JSON field names are a stable interface (tests/tools/tshark_compare.py reads them).
constexpr std::string_view kDumpDetails =
    "Text output: one line per RoCE frame, then a summary per file. Frames of other\n"
    "protocols are counted, not shown. A UD SEND to QP1 (the GSI) is a MAD: its CM\n"
    "message is decoded and shown after \" | \"; one that is not a valid CM MAD\n"
    "(framing: Q_Key 0x80010000, 256 bytes; then the CM codec) counts as cm_malformed\n"
    "(MADs of other classes, or LAP/APR, are not CM and not malformed). Exit: 0 ok,\n"
    "1 unreadable file or (--verify) a malformed RoCE frame, a bad ICRC or a malformed\n"
    "CM MAD, 2 usage error.\n"
    "\n"
    "JSON output (--json): {\"files\": [FILE...], \"summary\": SUMMARY} where\n"
    "  FILE    = {\"file\": path, \"frames\": [FRAME...], \"summary\": SUMMARY}\n"
    "            or {\"file\": path, \"error\": message} if it cannot be read\n"
    "  FRAME   = one object per RoCE frame (other protocols are left out):\n"
    "    frame (1-based index in the file), len (captured bytes),\n"
    "    status (\"ok\", \"bad_icrc\" or the parse error, e.g. \"bad_pad_count\");\n"
    "    when status is ok or bad_icrc also:\n"
    "    l3 (\"ipv4\"|\"ipv6\"|\"grh\"), src, dst (addresses), vlan (TCI, if tagged),\n"
    "    dscp, ecn (IP ECN bits 0..3), hop_limit (IPv4 TTL), flow_label (IPv6, GRH),\n"
    "    udp_sport (RoCEv2), opcode, opcode_name, se, mig,\n"
    "    pad, tver, pkey, fecn, becn, qpn, ack_req, psn, payload_len, and per header:\n"
    "    deth {qkey, src_qp}; reth {va, rkey, len};\n"
    "    atomic_eth {va, rkey, swap_add, compare}; atomic_ack_eth {orig};\n"
    "    aeth {syndrome, msn, type (\"ack\"|\"rnr_nak\"|\"nak\"|\"reserved\"),\n"
    "          ack: credit_code, credits (null for code 31 = no credit info);\n"
    "          rnr_nak: rnr_timer, rnr_ms; nak: nak_code, nak_name; reserved: value};\n"
    "    imm_dt (ImmDt as a big-endian number); ieth {rkey};\n"
    "    sack {bitmap_bytes, held: [[first, last]...]} (the PSN runs an ACK's SACK block\n"
    "          says the responder holds past BTH.PSN + 1; uroce's extension, docs/LOSS_RECOVERY.md);\n"
    "    place {first_psn, msg_len, va, rkey, recv_seq} (a SEND/WRITE payload that starts\n"
    "          with uroce's placement header: magic 'S' and a first PSN that fits the opcode);\n"
    "    icrc (the carried ICRC as a number; the 4 wire bytes are it little-endian),\n"
    "    icrc_ok, icrc_computed (when bad); cm (the CM message, for a MAD to QP1).\n"
    "    64-bit fields (va, swap_add, compare, orig) are \"0x...\" hex strings so\n"
    "    that readers using doubles do not round them; all other numbers are numbers.\n"
    "  SUMMARY = {frames, roce, icrc_ok, icrc_bad, malformed, not_roce, cm_mads, cm_malformed,\n"
    "             malformed_by_reason {reason: n}, not_roce_by_reason {reason: n},\n"
    "             opcodes {opcode_name: n}}; roce = icrc_ok + icrc_bad + malformed.\n";

constexpr CommandSpec kDumpCommand = {
    .name = "dump",
    .positional = "FILE.pcap...",
    .summary = "decode RoCE frames in pcap files, check every ICRC",
    .options = kDumpOptions,
    .min_positional = 1,
    .details = kDumpDetails,
};

[[gnu::format(printf, 2, 3)]] void appendf(std::string& s, const char* fmt, ...) {
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  if (n > 0) {
    const size_t at = s.size();
    s.resize(at + size_t(n) + 1);
    std::vsnprintf(s.data() + at, size_t(n) + 1, fmt, again);
    s.resize(at + size_t(n));
  }
  va_end(again);
}


// AETH credit code (the low five syndrome bits of an ACK) to the number of
// receive credits, as the IBA encodes it (logarithmic above 4; Linux rdmavt's
// credit_table is the same); code 31 means "no credit information".
constexpr std::array<uint16_t, 31> kAethCredits = {
    0,    1,    2,    3,    4,    6,    8,     12,    16,    24,    32,
    48,   64,   96,   128,  192,  256,  384,   512,   768,   1024,  1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768};

std::string_view ecn_name(uint8_t ecn) {
  static constexpr std::array<std::string_view, 4> kNames = {"not-ect", "ect1", "ect0", "ce"};
  return kNames[ecn & 3];
}

std::string_view l3_name(wire::L3Kind k) {
  switch (k) {
    case wire::L3Kind::kIpv4: return "ipv4";
    case wire::L3Kind::kIpv6: return "ipv6";
    case wire::L3Kind::kGrh: return "grh";
  }
  return "?";
}

std::string gid_text(const wire::Gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (g.is_ipv4_mapped()) {
    inet_ntop(AF_INET, g.raw + 12, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET6, g.raw, buf, sizeof(buf));
  }
  return buf;
}

// One frame as dump sees it: parsed without the ICRC check, ICRC recomputed apart.
struct Decoded {
  wire::ParseError err = wire::ParseError::kOk;
  wire::PacketDesc d;
  uint32_t icrc_computed = 0;  // meaningful when err == kOk
  std::optional<std::string> cm;  // a MAD to QP1: its one-line description
  std::optional<wire::Placement> place;  // a SEND/WRITE that starts with the placement header
  std::vector<std::pair<uint32_t, uint32_t>> sack;  // runs of PSNs a SACK block says are held
  uint32_t sack_bytes = 0;                          // its bitmap length; 0: no SACK block
  bool cm_malformed = false;      // ... and it is not a valid CM MAD
  bool icrc_ok() const { return err == wire::ParseError::kOk && icrc_computed == d.icrc; }
  std::string_view status() const {
    if (err != wire::ParseError::kOk) return wire::parse_error_name(err);
    return icrc_ok() ? "ok" : wire::parse_error_name(wire::ParseError::kBadIcrc);
  }
};

// uroce's extension (stack/wire/ext_headers.h): the SACK block of an ACK
// (the parser admits an ACK's payload only as one), and the placement header
// of a SEND/WRITE, recognised by its magic and a first PSN that fits the
// opcode (a First/Only starts the message at its own PSN, a Middle/Last after it).
void decode_ext(std::span<const uint8_t> frame, Decoded& r) {
  const wire::PacketDesc& d = r.d;
  const std::span<const uint8_t> payload = frame.subspan(d.payload_off, d.payload_len);
  if (d.opcode == wire::kRcAcknowledge && d.payload_len) {
    const std::span<const uint8_t> bits = wire::sack_bitmap(payload);
    r.sack_bytes = uint32_t(bits.size());
    for (uint32_t i = 1; i < bits.size() * 8; ++i) {
      if (!(bits[i / 8] >> (i % 8) & 1)) continue;
      const uint32_t psn = wire::psn_add(d.psn, 1 + i);
      if (!r.sack.empty() && wire::psn_add(r.sack.back().second, 1) == psn) r.sack.back().second = psn;
      else r.sack.emplace_back(psn, psn);
    }
    return;
  }
  const uint32_t flags = d.op().flags;
  wire::Placement p;
  if ((flags & (wire::kRc | wire::kReq)) != (wire::kRc | wire::kReq) || !(flags & (wire::kSend | wire::kWrite)) || !wire::read_placement(payload, p)) return;
  const bool first = flags & wire::kFirst;
  if (first ? p.first_psn != d.psn : wire::psn_cmp(p.first_psn, d.psn) >= 0) return;
  r.place = p;
}

Decoded decode(std::span<const uint8_t> frame) {
  Decoded r;
  r.err = wire::parse(frame, r.d, wire::ParseOptions{.verify_icrc = false});
  if (r.err != wire::ParseError::kOk) return r;
  const size_t l3_off = sizeof(wire::EthHdr) + (r.d.has_vlan ? sizeof(wire::VlanTag) : 0);
  const size_t icrc_off = size_t(r.d.payload_off) + r.d.payload_len + r.d.pad;
  r.icrc_computed = wire::icrc_compute(r.d.l3, frame.subspan(l3_off, icrc_off - l3_off));
  decode_ext(frame, r);
  if (cm::is_gsi_packet(r.d)) {
    // IBA 13.5.3: QP1 takes the GSI Q_Key and one 256-byte MAD (13.4.1); then
    // the CM codec (stack/cm/mad.cc) on it, as QP1's receive path does.
    const std::span<const uint8_t> payload = frame.subspan(r.d.payload_off, r.d.payload_len);
    r.cm = cm::describe_cm(r.d, payload);
    cm::CmMad m;
    const cm::CmError e = r.d.payload_len == cm::kMadBytes ? cm::decode(payload, m) : cm::CmError::kShort;
    const bool other = e == cm::CmError::kNotCm || e == cm::CmError::kUnknownAttr || e == cm::CmError::kBadMethod;
    r.cm_malformed = r.d.deth_qkey != cm::kGsiQkey || (e != cm::CmError::kOk && !other);
  }
  return r;
}

struct Summary {
  uint64_t frames = 0;
  uint64_t roce = 0;
  uint64_t icrc_ok = 0;
  uint64_t icrc_bad = 0;
  uint64_t malformed = 0;
  uint64_t not_roce = 0;
  uint64_t cm_mads = 0;       // RoCE frames to QP1
  uint64_t cm_malformed = 0;  // ... that are not valid CM MADs
  std::array<uint64_t, size_t(wire::ParseError::kCount)> by_error{};
  std::array<uint64_t, 256> by_opcode{};

  void add(const Decoded& f) {
    ++frames;
    if (f.err != wire::ParseError::kOk) ++by_error[size_t(f.err)];
    if (wire::is_not_roce(f.err)) {
      ++not_roce;
      return;
    }
    ++roce;
    if (f.err != wire::ParseError::kOk) {
      ++malformed;
      return;
    }
    ++by_opcode[f.d.opcode];
    ++(f.icrc_ok() ? icrc_ok : icrc_bad);
    if (f.cm) ++cm_mads;
    if (f.cm_malformed) ++cm_malformed;
  }
  void add(const Summary& o) {
    frames += o.frames;
    roce += o.roce;
    icrc_ok += o.icrc_ok;
    icrc_bad += o.icrc_bad;
    malformed += o.malformed;
    not_roce += o.not_roce;
    cm_mads += o.cm_mads;
    cm_malformed += o.cm_malformed;
    for (size_t i = 0; i < by_error.size(); ++i) by_error[i] += o.by_error[i];
    for (size_t i = 0; i < by_opcode.size(); ++i) by_opcode[i] += o.by_opcode[i];
  }
  bool verify_failed() const { return icrc_bad != 0 || malformed != 0 || cm_malformed != 0; }
};

// ---- --explain: what a frame does, in the words of IBA 9.7 ----

std::string psn_text(uint32_t psn) {
  std::string s;
  appendf(s, "0x%06x", psn & wire::kBthPsnMask);
  return s;
}

// Position of a packet in its message, from the opcode table.
std::string_view position(uint32_t flags) {
  if ((flags & wire::kOnly) == wire::kOnly) return "Only";
  if (flags & wire::kFirst) return "First";
  if (flags & wire::kMiddle) return "Middle";
  if (flags & wire::kLast) return "Last";
  return "";
}

// The responder's duty for a reliable request packet (IBA 9.7.5.1: a request
// with AckReq must be acknowledged; the responder may also acknowledge, or
// coalesce into a later ACK, any other).
void explain_ack_duty(std::string& s, const wire::PacketDesc& d) {
  if (d.ack_req) {
    appendf(s, "; AckReq set: the responder must ACK PSN %s (or NAK it)", psn_text(d.psn).c_str());
  } else {
    s += "; AckReq clear: no ACK needed for this packet alone, a later ACK covers it";
  }
}

// What --explain remembers across the frames of one file: the highest request
// PSN seen per connection direction (source, destination, destination QP), to
// recognise retransmissions.
struct ExplainState {
  std::map<std::tuple<std::string, std::string, uint32_t>, uint32_t> max_req_psn;
};

// A request whose PSN is not beyond the highest one seen on its connection is
// sent again: go-back-N after a NAK or timeout. IBA 9.7.5.2: a responder that
// has executed it already treats it as a duplicate (re-ACK, READ/atomic
// replayed from its responder resources, nothing executed twice).
std::string retransmission_note(const wire::PacketDesc& d, ExplainState& st) {
  const auto key = std::make_tuple(gid_text(d.sgid), gid_text(d.dgid), d.dest_qp);
  const auto it = st.max_req_psn.find(key);
  std::string note;
  if (it != st.max_req_psn.end() && wire::psn_cmp(d.psn, it->second) <= 0) {
    appendf(note, " [PSN not beyond %s, the highest seen on this connection: sent again (go-back-N after a NAK "
                  "or timeout) or late; a responder that has executed it already treats it as a duplicate: "
                  "acknowledged again, not executed twice]",
            psn_text(it->second).c_str());
    return note;
  }
  st.max_req_psn[key] = d.psn;
  return note;
}

std::string explain_frame(const wire::PacketDesc& d, uint32_t mtu) {
  const wire::OpcodeInfo& op = d.op();
  const uint32_t f = op.flags;
  const bool rc = f & wire::kRc, uc = f & wire::kUc, ud = f & wire::kUd;
  std::string s;
  if (f & wire::kCnpOp) {
    appendf(s, "CNP to QP 0x%06x: its receiver got packets marked ECN CE (congestion) from this QP; the sender "
               "must cut its rate (DCQCN: Rc = Rc * (1 - alpha/2)). Not acknowledged",
            d.dest_qp);
    return s;
  }
  if (f & wire::kReq) {
    const std::string_view pos = position(f);
    if (f & wire::kRead) {
      const uint32_t n = d.reth_len ? (d.reth_len + mtu - 1) / mtu : 1;
      appendf(s, "READ Request PSN %s for %u bytes at va 0x%llx (R_Key 0x%08x): the responder must answer with ",
              psn_text(d.psn).c_str(), d.reth_len, static_cast<unsigned long long>(d.reth_va), d.reth_rkey);
      if (n == 1) {
        appendf(s, "one READ Response Only, PSN %s", psn_text(d.psn).c_str());
      } else {
        std::string middles;
        if (n > 2) appendf(middles, "%u Middle, ", n - 2);
        appendf(s, "%u READ Response packets (First, %sLast) at path MTU %u, PSNs %s..%s", n, middles.c_str(), mtu,
                psn_text(d.psn).c_str(), psn_text(d.psn + n - 1).c_str());
      }
      s += "; the request takes as many PSNs, so the next request is PSN " + psn_text(d.psn + n);
      return s;
    }
    if (f & wire::kAtomic) {
      if (d.opcode == wire::kRcCompareSwap) {
        appendf(s, "CmpSwap PSN %s at va 0x%llx: if the 8 bytes there equal 0x%llx, write 0x%llx", psn_text(d.psn).c_str(),
                static_cast<unsigned long long>(d.atomic_va), static_cast<unsigned long long>(d.atomic_compare),
                static_cast<unsigned long long>(d.atomic_swap_add));
      } else {
        appendf(s, "FetchAdd PSN %s: add 0x%llx to the 8 bytes at va 0x%llx", psn_text(d.psn).c_str(),
                static_cast<unsigned long long>(d.atomic_swap_add), static_cast<unsigned long long>(d.atomic_va));
      }
      s += "; the responder must answer with an Atomic Acknowledge, PSN " + psn_text(d.psn) +
           ", carrying the original value (executed once; a duplicate gets the saved value)";
      return s;
    }
    const bool send = f & wire::kSend;
    appendf(s, "%s %.*s%s PSN %s, %u bytes", send ? "SEND" : "WRITE", int(pos.size()), pos.data(),
            (f & wire::kImm) ? " with Immediate" : (f & wire::kInv) ? " with Invalidate" : "", psn_text(d.psn).c_str(),
            d.payload_len);
    if (op.has(wire::Hdr::kReth)) {
      appendf(s, " to va 0x%llx (R_Key 0x%08x, message %u bytes)", static_cast<unsigned long long>(d.reth_va),
              d.reth_rkey, d.reth_len);
    }
    if (ud) {
      appendf(s, " from QP 0x%06x (Q_Key 0x%08x): UD, unreliable: never acknowledged; the receiver drops it if "
                 "the Q_Key differs or no receive WQE is posted",
              d.deth_src_qp, d.deth_qkey);
      return s;
    }
    if (f & wire::kRwr) {
      s += send ? "; completes a receive WQE" : "; the immediate data consumes a receive WQE";
      if (rc) s += " (none posted: RNR NAK)";
    } else if (send && (f & wire::kFirst)) {
      s += "; starts a message that will fill one receive WQE";
    }
    if (d.se && (f & wire::kLast)) s += "; Solicited Event: the receiver's CQ raises an event";
    if (uc) {
      s += "; UC: never acknowledged, a PSN gap drops the rest of the message";
      return s;
    }
    explain_ack_duty(s, d);
    return s;
  }
  // Responses: ACK / NAK, READ responses, atomic ACK (to the requester's completer).
  if (op.has(wire::Hdr::kAeth) && !(f & (wire::kRead | wire::kAtomic))) {
    const uint8_t v = wire::aeth_value(d.aeth_syndrome);
    switch (wire::aeth_type(d.aeth_syndrome)) {
      case wire::AethType::kAck:
        appendf(s, "ACK PSN %s (MSN %u): every request up to PSN %s is done; the requester retires those WQEs "
                   "and completes the signaled ones",
                psn_text(d.psn).c_str(), d.aeth_msn, psn_text(d.psn).c_str());
        return s;
      case wire::AethType::kRnrNak:
        appendf(s, "RNR NAK PSN %s: the responder had no receive WQE; the requester waits the RNR timer "
                   "(code %u = %.2f ms) and resends from PSN %s, spending one rnr_retry (7 = infinite)",
                psn_text(d.psn).c_str(), unsigned(v), double(wire::rnr_timer_ns(v)) / 1e6, psn_text(d.psn).c_str());
        return s;
      case wire::AethType::kNak:
        switch (wire::NakCode(v)) {
          case wire::NakCode::kPsnSequenceError:
            appendf(s, "NAK PSN Sequence Error: the responder expected PSN %s and got a later one; the requester "
                       "must resend everything from PSN %s (go-back-N) and completes nothing before it",
                    psn_text(d.psn).c_str(), psn_text(d.psn).c_str());
            return s;
          case wire::NakCode::kInvalidRequest:
            appendf(s, "NAK Invalid Request for PSN %s: fatal; the requester completes that WQE with "
                       "\"remote invalid request error\" and its QP goes to ERR",
                    psn_text(d.psn).c_str());
            return s;
          case wire::NakCode::kRemoteAccessError:
            appendf(s, "NAK Remote Access Error for PSN %s (bad R_Key, bounds or access rights): fatal; the "
                       "requester completes that WQE with \"remote access error\" and its QP goes to ERR",
                    psn_text(d.psn).c_str());
            return s;
          case wire::NakCode::kRemoteOperationalError:
            appendf(s, "NAK Remote Operational Error for PSN %s: fatal; the requester completes that WQE with "
                       "\"remote operation error\" and its QP goes to ERR",
                    psn_text(d.psn).c_str());
            return s;
          case wire::NakCode::kInvalidRdRequest:
            appendf(s, "NAK Invalid RD Request for PSN %s (reliable datagram only)", psn_text(d.psn).c_str());
            return s;
        }
        appendf(s, "NAK with reserved code %u for PSN %s: the requester treats it as invalid", unsigned(v),
                psn_text(d.psn).c_str());
        return s;
      case wire::AethType::kReserved:
        appendf(s, "AETH with a reserved syndrome 0x%02x: the requester drops it", unsigned(d.aeth_syndrome));
        return s;
    }
  }
  if (f & wire::kRead) {
    const std::string_view pos = position(f);
    appendf(s, "READ Response %.*s PSN %s, %u bytes of the READ data", int(pos.size()), pos.data(),
            psn_text(d.psn).c_str(), d.payload_len);
    if (f & wire::kLast) {
      appendf(s, "; ends the READ: the requester completes it (implicitly acknowledging every request before "
                 "PSN %s) and sends no ACK",
              psn_text(d.psn).c_str());
    } else {
      s += "; more follow at the next PSNs; the requester sends no ACK";
    }
    return s;
  }
  if (f & wire::kAtomic) {
    appendf(s, "Atomic Acknowledge PSN %s: the original value was 0x%llx; the requester writes it to its buffer and "
               "completes the atomic",
            psn_text(d.psn).c_str(), static_cast<unsigned long long>(d.atomic_ack_orig));
    return s;
  }
  return std::string(op.name);
}

std::string explain(const wire::PacketDesc& d, uint32_t mtu, ExplainState& st) {
  std::string s = explain_frame(d, mtu);
  const uint32_t f = d.op().flags;
  if ((f & wire::kReq) && !(f & wire::kUd)) s += retransmission_note(d, st);
  if (d.ecn() == 3) {
    s += "; IP ECN is CE: a switch marked congestion, so the receiver's NIC sends a CNP back to the sending QP "
         "(RoCEv2 congestion management)";
  }
  return s;
}

// ---- text output ----

void aeth_text(std::string& s, uint8_t syndrome, uint32_t msn) {
  const uint8_t v = wire::aeth_value(syndrome);
  switch (wire::aeth_type(syndrome)) {
    case wire::AethType::kAck:
      if (v < kAethCredits.size()) {
        appendf(s, " aeth=[ACK credits=%u", unsigned(kAethCredits[v]));
      } else {
        appendf(s, " aeth=[ACK credits=invalid");
      }
      break;
    case wire::AethType::kRnrNak:
      appendf(s, " aeth=[RNR_NAK timer=%u (%.2f ms)", unsigned(v), double(wire::rnr_timer_ns(v)) / 1e6);
      break;
    case wire::AethType::kNak: {
      const std::string_view name = wire::nak_code_name(v);
      appendf(s, " aeth=[NAK code=%u (%.*s)", unsigned(v), int(name.size()), name.data());
      break;
    }
    case wire::AethType::kReserved:
      appendf(s, " aeth=[reserved value=%u", unsigned(v));
      break;
  }
  appendf(s, " syndrome=0x%02x msn=%u]", unsigned(syndrome), msn);
}

std::string frame_text(uint64_t n, size_t len, const Decoded& f) {
  std::string s;
  appendf(s, "%6llu ", static_cast<unsigned long long>(n));
  if (f.err != wire::ParseError::kOk) {
    const std::string_view why = wire::parse_error_name(f.err);
    appendf(s, "malformed RoCE frame: %.*s (%zu bytes)", int(why.size()), why.data(), len);
    return s;
  }
  const wire::PacketDesc& d = f.d;
  const std::string_view name = d.op().name;
  appendf(s, "%s > %s %.*s qpn=0x%06x psn=%u ackreq=%d se=%d pad=%u pkey=0x%04x ecn=%.*s",
          gid_text(d.sgid).c_str(), gid_text(d.dgid).c_str(), int(name.size()), name.data(), d.dest_qp,
          d.psn, d.ack_req, d.se, unsigned(d.pad), unsigned(d.pkey), int(ecn_name(d.ecn()).size()),
          ecn_name(d.ecn()).data());
  if (d.fecn) s += " fecn=1";
  if (d.becn) s += " becn=1";
  if (d.mig) s += " mig=1";
  if (d.has_vlan) appendf(s, " vlan=0x%04x", unsigned(d.vlan_tci));
  if (d.l3 == wire::L3Kind::kGrh) s += " rocev1";
  const wire::OpcodeInfo& op = d.op();
  if (op.has(wire::Hdr::kDeth)) appendf(s, " deth=[qkey=0x%08x srcqp=0x%06x]", d.deth_qkey, d.deth_src_qp);
  if (op.has(wire::Hdr::kReth)) {
    appendf(s, " reth=[va=0x%016llx rkey=0x%08x len=%u]", static_cast<unsigned long long>(d.reth_va),
            d.reth_rkey, d.reth_len);
  }
  if (op.has(wire::Hdr::kAtomicEth)) {
    appendf(s, " atomiceth=[va=0x%016llx rkey=0x%08x swap_add=0x%016llx compare=0x%016llx]",
            static_cast<unsigned long long>(d.atomic_va), d.atomic_rkey,
            static_cast<unsigned long long>(d.atomic_swap_add), static_cast<unsigned long long>(d.atomic_compare));
  }
  if (op.has(wire::Hdr::kAeth)) aeth_text(s, d.aeth_syndrome, d.aeth_msn);
  if (op.has(wire::Hdr::kAtomicAckEth)) {
    appendf(s, " atomicacketh=[orig=0x%016llx]", static_cast<unsigned long long>(d.atomic_ack_orig));
  }
  if (op.has(wire::Hdr::kImmDt)) appendf(s, " immdt=0x%08x", d.imm);
  if (op.has(wire::Hdr::kIeth)) appendf(s, " ieth=[rkey=0x%08x]", d.ieth_rkey);
  if (f.place) {
    appendf(s, " place=[first_psn=%u len=%u va=0x%016llx rkey=0x%08x recv_seq=%u]", f.place->first_psn,
            f.place->msg_len, static_cast<unsigned long long>(f.place->va), f.place->rkey, f.place->recv_seq);
  }
  if (f.sack_bytes) {
    appendf(s, " sack=[bytes=%u held=", f.sack_bytes);
    for (size_t i = 0; i < f.sack.size(); ++i) {
      appendf(s, i ? ",%u" : "%u", f.sack[i].first);
      if (f.sack[i].second != f.sack[i].first) appendf(s, "-%u", f.sack[i].second);
    }
    s += "]";
  }
  appendf(s, " len=%u", d.payload_len);
  if (f.icrc_ok()) {
    appendf(s, " icrc=ok");
  } else {
    appendf(s, " icrc=bad (carried 0x%08x, computed 0x%08x)", d.icrc, f.icrc_computed);
  }
  if (f.cm) s += " | " + *f.cm;
  return s;
}

void print_summary_text(std::string_view what, const Summary& m) {
  std::printf("summary %.*s: %llu frames, %llu RoCE (%llu icrc ok, %llu icrc bad, %llu malformed), %llu not RoCE\n",
              int(what.size()), what.data(), static_cast<unsigned long long>(m.frames),
              static_cast<unsigned long long>(m.roce), static_cast<unsigned long long>(m.icrc_ok),
              static_cast<unsigned long long>(m.icrc_bad), static_cast<unsigned long long>(m.malformed),
              static_cast<unsigned long long>(m.not_roce));
  auto reasons = [&](const char* label, bool not_roce) {
    std::string s;
    for (size_t i = 1; i < m.by_error.size(); ++i) {
      const auto e = wire::ParseError(i);
      if (m.by_error[i] == 0 || wire::is_not_roce(e) != not_roce) continue;
      const std::string_view n = wire::parse_error_name(e);
      appendf(s, " %.*s=%llu", int(n.size()), n.data(), static_cast<unsigned long long>(m.by_error[i]));
    }
    if (!s.empty()) std::printf("  %s:%s\n", label, s.c_str());
  };
  reasons("malformed", false);
  reasons("not RoCE", true);
  if (m.cm_mads) {
    std::printf("  CM MADs: %llu (%llu malformed)\n", static_cast<unsigned long long>(m.cm_mads),
                static_cast<unsigned long long>(m.cm_malformed));
  }
  std::string ops;
  for (size_t i = 0; i < m.by_opcode.size(); ++i) {
    if (m.by_opcode[i] == 0) continue;
    const std::string_view n = wire::kOpcodes[i].name;
    appendf(ops, "%s%.*s=%llu", ops.empty() ? " " : ", ", int(n.size()), n.data(),
            static_cast<unsigned long long>(m.by_opcode[i]));
  }
  if (!ops.empty()) std::printf("  opcodes:%s\n", ops.c_str());
}

// ---- JSON output ----

/// A 64-bit field as a "0x..." string (JSON numbers lose bits past 2^53).
void hex64(JsonWriter& w, std::string_view key, uint64_t v) {
  std::string h;
  appendf(h, "0x%016llx", static_cast<unsigned long long>(v));
  w.key(key).str(h);
}

void write_aeth_json(JsonWriter& w, uint8_t syndrome, uint32_t msn) {
  w.begin_object().key("syndrome").num(syndrome).key("msn").num(msn);
  const uint8_t v = wire::aeth_value(syndrome);
  switch (wire::aeth_type(syndrome)) {
    case wire::AethType::kAck:
      w.key("type").str("ack").key("credit_code").num(v).key("credits");
      if (v < kAethCredits.size()) {
        w.num(kAethCredits[v]);
      } else {
        w.null();
      }
      break;
    case wire::AethType::kRnrNak:
      w.key("type").str("rnr_nak").key("rnr_timer").num(v).key("rnr_ms").fixed(double(wire::rnr_timer_ns(v)) / 1e6, 2);
      break;
    case wire::AethType::kNak:
      w.key("type").str("nak").key("nak_code").num(v).key("nak_name").str(wire::nak_code_name(v));
      break;
    case wire::AethType::kReserved:
      w.key("type").str("reserved").key("value").num(v);
      break;
  }
  w.end_object();
}

/// One frame's object; explain (if not empty) as its last field.
void write_frame_json(JsonWriter& w, uint64_t n, size_t len, const Decoded& f, std::string_view explain) {
  w.begin_object().key("frame").num(n).key("len").num(len).key("status").str(f.status());
  if (f.err != wire::ParseError::kOk) {
    w.end_object();
    return;
  }
  const wire::PacketDesc& d = f.d;
  w.key("l3").str(l3_name(d.l3)).key("src").str(gid_text(d.sgid)).key("dst").str(gid_text(d.dgid));
  if (d.has_vlan) w.key("vlan").num(d.vlan_tci);
  w.key("dscp").num(d.traffic_class >> 2).key("ecn").num(d.ecn()).key("hop_limit").num(d.hop_limit);
  if (d.l3 != wire::L3Kind::kIpv4) w.key("flow_label").num(d.flow_label);
  if (d.l3 != wire::L3Kind::kGrh) w.key("udp_sport").num(d.udp_sport);
  w.key("opcode").num(d.opcode).key("opcode_name").str(d.op().name);
  w.key("se").boolean(d.se).key("mig").boolean(d.mig).key("pad").num(d.pad).key("tver").num(d.tver);
  w.key("pkey").num(d.pkey).key("fecn").boolean(d.fecn).key("becn").boolean(d.becn).key("qpn").num(d.dest_qp);
  w.key("ack_req").boolean(d.ack_req).key("psn").num(d.psn).key("payload_len").num(d.payload_len);
  const wire::OpcodeInfo& op = d.op();
  if (op.has(wire::Hdr::kDeth)) {
    w.key("deth").begin_object().key("qkey").num(d.deth_qkey).key("src_qp").num(d.deth_src_qp).end_object();
  }
  if (op.has(wire::Hdr::kReth)) {
    w.key("reth").begin_object();
    hex64(w, "va", d.reth_va);
    w.key("rkey").num(d.reth_rkey).key("len").num(d.reth_len).end_object();
  }
  if (op.has(wire::Hdr::kAtomicEth)) {
    w.key("atomic_eth").begin_object();
    hex64(w, "va", d.atomic_va);
    w.key("rkey").num(d.atomic_rkey);
    hex64(w, "swap_add", d.atomic_swap_add);
    hex64(w, "compare", d.atomic_compare);
    w.end_object();
  }
  if (op.has(wire::Hdr::kAeth)) write_aeth_json(w.key("aeth"), d.aeth_syndrome, d.aeth_msn);
  if (op.has(wire::Hdr::kAtomicAckEth)) {
    w.key("atomic_ack_eth").begin_object();
    hex64(w, "orig", d.atomic_ack_orig);
    w.end_object();
  }
  if (op.has(wire::Hdr::kImmDt)) w.key("imm_dt").num(d.imm);
  if (op.has(wire::Hdr::kIeth)) w.key("ieth").begin_object().key("rkey").num(d.ieth_rkey).end_object();
  if (f.place) {
    w.key("place").begin_object().key("first_psn").num(f.place->first_psn).key("msg_len").num(f.place->msg_len);
    hex64(w, "va", f.place->va);
    w.key("rkey").num(f.place->rkey).key("recv_seq").num(f.place->recv_seq).end_object();
  }
  if (f.sack_bytes) {
    w.key("sack").begin_object().key("bitmap_bytes").num(f.sack_bytes).key("held").begin_array();
    for (const auto& [lo, hi] : f.sack) w.begin_array().num(lo).num(hi).end_array();
    w.end_array().end_object();
  }
  w.key("icrc").num(d.icrc).key("icrc_ok").boolean(f.icrc_ok());
  if (!f.icrc_ok()) w.key("icrc_computed").num(f.icrc_computed);
  if (f.cm) w.key("cm").str(*f.cm);
  if (!explain.empty()) w.key("explain").str(explain);
  w.end_object();
}

void write_summary_json(JsonWriter& w, const Summary& m) {
  w.begin_object().key("frames").num(m.frames).key("roce").num(m.roce).key("icrc_ok").num(m.icrc_ok);
  w.key("icrc_bad").num(m.icrc_bad).key("malformed").num(m.malformed).key("not_roce").num(m.not_roce);
  w.key("cm_mads").num(m.cm_mads).key("cm_malformed").num(m.cm_malformed);
  for (const bool not_roce : {false, true}) {
    w.key(not_roce ? "not_roce_by_reason" : "malformed_by_reason").begin_object();
    for (size_t i = 1; i < m.by_error.size(); ++i) {
      const auto e = wire::ParseError(i);
      if (m.by_error[i] != 0 && wire::is_not_roce(e) == not_roce) w.key(wire::parse_error_name(e)).num(m.by_error[i]);
    }
    w.end_object();
  }
  w.key("opcodes").begin_object();
  for (size_t i = 0; i < m.by_opcode.size(); ++i) {
    if (m.by_opcode[i] != 0) w.key(wire::kOpcodes[i].name).num(m.by_opcode[i]);
  }
  w.end_object().end_object();
}

}  // namespace

int cmd_dump(int argc, char** argv) {
  Args args;
  if (auto rc = parse_command_line(kDumpCommand, argc, argv, args)) return *rc;
  const bool json = args.flag("json");
  const bool verify = args.flag("verify");
  const bool explaining = args.flag("explain");
  const uint32_t mtu = uint32_t(args.get_uint("mtu"));
  if (mtu & (mtu - 1)) {
    std::fprintf(stderr, "uroce dump: --mtu must be 256, 512, 1024, 2048 or 4096 (see uroce dump --help)\n");
    return kExitUsage;
  }

  JsonWriter w;  // --json: written out a frame at a time
  if (json) {
    w.begin_object().key("files").begin_array();
  } else {
    std::printf("# uroce dump %s\n", args.config_line().c_str());
  }
  Summary total;
  bool read_failed = false;
  for (const std::string_view path_sv : args.positional()) {
    const std::string path(path_sv);
    auto records = wire::read_pcap(path);
    if (json) w.newline().begin_object().key("file").str(path);
    if (!records.ok()) {
      read_failed = true;
      std::fprintf(stderr, "uroce dump: %s: %s\n", path.c_str(), records.status().message());
      if (json) w.key("error").str(records.status().message()).end_object();
      continue;
    }
    if (json) {
      w.key("frames").begin_array();
    } else {
      std::printf("# file %s: %zu frames\n", path.c_str(), records->size());
    }
    Summary file;
    ExplainState explain_state;
    uint64_t n = 0;
    for (const wire::PcapRecord& rec : *records) {
      ++n;
      const Decoded f = decode(rec.data);
      file.add(f);
      if (wire::is_not_roce(f.err)) continue;
      const std::string why = explaining && f.err == wire::ParseError::kOk ? explain(f.d, mtu, explain_state) : std::string();
      if (json) {
        write_frame_json(w.newline(), n, rec.data.size(), f, why);
        w.flush(stdout);
      } else {
        std::printf("%s\n", frame_text(n, rec.data.size(), f).c_str());
        if (!why.empty()) std::printf("       = %s\n", why.c_str());
      }
    }
    if (json) {
      write_summary_json(w.end_array().newline().key("summary"), file);
      w.end_object();
    } else {
      print_summary_text(path, file);
    }
    total.add(file);
  }
  if (json) {
    write_summary_json(w.end_array().newline().key("summary"), total);
    w.end_object().flush(stdout);
    std::printf("\n");
  } else if (args.positional().size() > 1) {
    print_summary_text("total", total);
  }
  if (verify && !json) {
    std::printf("verify: %s\n", total.verify_failed() || read_failed ? "FAIL" : "ok");
  }
  if (verify && total.verify_failed()) {
    std::fprintf(stderr, "uroce dump: verify failed: %llu RoCE frames malformed, %llu with a bad ICRC, %llu malformed CM MADs\n",
                 static_cast<unsigned long long>(total.malformed),
                 static_cast<unsigned long long>(total.icrc_bad), static_cast<unsigned long long>(total.cm_malformed));
  }
  return read_failed || (verify && total.verify_failed()) ? kExitFailure : kExitOk;
}

}  // namespace uroce::apps
