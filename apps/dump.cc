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
#include <cstdarg>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

#include "apps/args.h"
#include "apps/commands.h"
#include "stack/wire/aeth.h"
#include "stack/wire/headers.h"
#include "stack/wire/icrc.h"
#include "stack/wire/opcodes.h"
#include "stack/wire/packet.h"
#include "stack/wire/pcap.h"

namespace uroce::apps {
namespace {

constexpr OptSpec kDumpOptions[] = {
    {.name = "verify", .help = "exit 1 if any RoCE frame is malformed or has a bad ICRC"},
    {.name = "json", .help = "write JSON (fields below) instead of text lines"},
};

// The JSON field names are a stable interface (tests/tools/tshark_compare.py reads them).
constexpr std::string_view kDumpDetails =
    "Text output: one line per RoCE frame, then a summary per file. Frames of other\n"
    "protocols are counted, not shown. Exit: 0 ok, 1 unreadable file or (--verify) a\n"
    "malformed RoCE frame or bad ICRC, 2 usage error.\n"
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
    "    icrc (the carried ICRC as a number; the 4 wire bytes are it little-endian),\n"
    "    icrc_ok, icrc_computed (when bad).\n"
    "    64-bit fields (va, swap_add, compare, orig) are \"0x...\" hex strings so\n"
    "    that readers using doubles do not round them; all other numbers are numbers.\n"
    "  SUMMARY = {frames, roce, icrc_ok, icrc_bad, malformed, not_roce,\n"
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

std::string json_string(std::string_view v) {
  std::string r = "\"";
  for (const char c : v) {
    if (c == '"' || c == '\\') {
      r += '\\';
      r += c;
    } else if (uint8_t(c) < 0x20) {
      appendf(r, "\\u%04x", unsigned(uint8_t(c)));
    } else {
      r += c;
    }
  }
  r += '"';
  return r;
}

// A flat JSON object built field by field; nested objects are added as raw text.
class JsonObject {
 public:
  JsonObject& raw(std::string_view key, std::string_view value) {
    s_ += s_.size() > 1 ? "," : "";
    s_ += json_string(key);
    s_ += ':';
    s_.append(value);
    return *this;
  }
  JsonObject& num(std::string_view key, uint64_t v) { return raw(key, std::to_string(v)); }
  JsonObject& boolean(std::string_view key, bool v) { return raw(key, v ? "true" : "false"); }
  JsonObject& str(std::string_view key, std::string_view v) { return raw(key, json_string(v)); }
  JsonObject& hex64(std::string_view key, uint64_t v) {
    std::string h;
    appendf(h, "\"0x%016llx\"", static_cast<unsigned long long>(v));
    return raw(key, h);
  }
  std::string done() { return s_ + "}"; }

 private:
  std::string s_ = "{";
};

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
  bool icrc_ok() const { return err == wire::ParseError::kOk && icrc_computed == d.icrc; }
  std::string_view status() const {
    if (err != wire::ParseError::kOk) return wire::parse_error_name(err);
    return icrc_ok() ? "ok" : wire::parse_error_name(wire::ParseError::kBadIcrc);
  }
};

Decoded decode(std::span<const uint8_t> frame) {
  Decoded r;
  r.err = wire::parse(frame, r.d, wire::ParseOptions{.verify_icrc = false});
  if (r.err != wire::ParseError::kOk) return r;
  const size_t l3_off = sizeof(wire::EthHdr) + (r.d.has_vlan ? sizeof(wire::VlanTag) : 0);
  const size_t icrc_off = size_t(r.d.payload_off) + r.d.payload_len + r.d.pad;
  r.icrc_computed = wire::icrc_compute(r.d.l3, frame.subspan(l3_off, icrc_off - l3_off));
  return r;
}

struct Summary {
  uint64_t frames = 0;
  uint64_t roce = 0;
  uint64_t icrc_ok = 0;
  uint64_t icrc_bad = 0;
  uint64_t malformed = 0;
  uint64_t not_roce = 0;
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
  }
  void add(const Summary& o) {
    frames += o.frames;
    roce += o.roce;
    icrc_ok += o.icrc_ok;
    icrc_bad += o.icrc_bad;
    malformed += o.malformed;
    not_roce += o.not_roce;
    for (size_t i = 0; i < by_error.size(); ++i) by_error[i] += o.by_error[i];
    for (size_t i = 0; i < by_opcode.size(); ++i) by_opcode[i] += o.by_opcode[i];
  }
  bool verify_failed() const { return icrc_bad != 0 || malformed != 0; }
};

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
  appendf(s, " len=%u", d.payload_len);
  if (f.icrc_ok()) {
    appendf(s, " icrc=ok");
  } else {
    appendf(s, " icrc=bad (carried 0x%08x, computed 0x%08x)", d.icrc, f.icrc_computed);
  }
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

std::string aeth_json(uint8_t syndrome, uint32_t msn) {
  JsonObject o;
  o.num("syndrome", syndrome).num("msn", msn);
  const uint8_t v = wire::aeth_value(syndrome);
  switch (wire::aeth_type(syndrome)) {
    case wire::AethType::kAck:
      o.str("type", "ack").num("credit_code", v);
      if (v < kAethCredits.size()) {
        o.num("credits", kAethCredits[v]);
      } else {
        o.raw("credits", "null");
      }
      break;
    case wire::AethType::kRnrNak: {
      std::string ms;
      appendf(ms, "%.2f", double(wire::rnr_timer_ns(v)) / 1e6);
      o.str("type", "rnr_nak").num("rnr_timer", v).raw("rnr_ms", ms);
      break;
    }
    case wire::AethType::kNak:
      o.str("type", "nak").num("nak_code", v).str("nak_name", wire::nak_code_name(v));
      break;
    case wire::AethType::kReserved:
      o.str("type", "reserved").num("value", v);
      break;
  }
  return o.done();
}

std::string frame_json(uint64_t n, size_t len, const Decoded& f) {
  JsonObject o;
  o.num("frame", n).num("len", len).str("status", f.status());
  if (f.err != wire::ParseError::kOk) return o.done();
  const wire::PacketDesc& d = f.d;
  o.str("l3", l3_name(d.l3)).str("src", gid_text(d.sgid)).str("dst", gid_text(d.dgid));
  if (d.has_vlan) o.num("vlan", d.vlan_tci);
  o.num("dscp", d.traffic_class >> 2).num("ecn", d.ecn()).num("hop_limit", d.hop_limit);
  if (d.l3 != wire::L3Kind::kIpv4) o.num("flow_label", d.flow_label);
  if (d.l3 != wire::L3Kind::kGrh) o.num("udp_sport", d.udp_sport);
  o.num("opcode", d.opcode).str("opcode_name", d.op().name);
  o.boolean("se", d.se).boolean("mig", d.mig).num("pad", d.pad).num("tver", d.tver).num("pkey", d.pkey);
  o.boolean("fecn", d.fecn).boolean("becn", d.becn).num("qpn", d.dest_qp);
  o.boolean("ack_req", d.ack_req).num("psn", d.psn).num("payload_len", d.payload_len);
  const wire::OpcodeInfo& op = d.op();
  if (op.has(wire::Hdr::kDeth)) {
    o.raw("deth", JsonObject().num("qkey", d.deth_qkey).num("src_qp", d.deth_src_qp).done());
  }
  if (op.has(wire::Hdr::kReth)) {
    o.raw("reth", JsonObject().hex64("va", d.reth_va).num("rkey", d.reth_rkey).num("len", d.reth_len).done());
  }
  if (op.has(wire::Hdr::kAtomicEth)) {
    o.raw("atomic_eth", JsonObject()
                            .hex64("va", d.atomic_va)
                            .num("rkey", d.atomic_rkey)
                            .hex64("swap_add", d.atomic_swap_add)
                            .hex64("compare", d.atomic_compare)
                            .done());
  }
  if (op.has(wire::Hdr::kAeth)) o.raw("aeth", aeth_json(d.aeth_syndrome, d.aeth_msn));
  if (op.has(wire::Hdr::kAtomicAckEth)) {
    o.raw("atomic_ack_eth", JsonObject().hex64("orig", d.atomic_ack_orig).done());
  }
  if (op.has(wire::Hdr::kImmDt)) o.num("imm_dt", d.imm);
  if (op.has(wire::Hdr::kIeth)) o.raw("ieth", JsonObject().num("rkey", d.ieth_rkey).done());
  o.num("icrc", d.icrc).boolean("icrc_ok", f.icrc_ok());
  if (!f.icrc_ok()) o.num("icrc_computed", f.icrc_computed);
  return o.done();
}

std::string summary_json(const Summary& m) {
  JsonObject o;
  o.num("frames", m.frames).num("roce", m.roce).num("icrc_ok", m.icrc_ok).num("icrc_bad", m.icrc_bad);
  o.num("malformed", m.malformed).num("not_roce", m.not_roce);
  JsonObject malformed, not_roce, ops;
  for (size_t i = 1; i < m.by_error.size(); ++i) {
    if (m.by_error[i] == 0) continue;
    const auto e = wire::ParseError(i);
    (wire::is_not_roce(e) ? not_roce : malformed).num(wire::parse_error_name(e), m.by_error[i]);
  }
  for (size_t i = 0; i < m.by_opcode.size(); ++i) {
    if (m.by_opcode[i] != 0) ops.num(wire::kOpcodes[i].name, m.by_opcode[i]);
  }
  o.raw("malformed_by_reason", malformed.done()).raw("not_roce_by_reason", not_roce.done());
  o.raw("opcodes", ops.done());
  return o.done();
}

}  // namespace

int cmd_dump(int argc, char** argv) {
  Args args;
  if (auto rc = parse_command_line(kDumpCommand, argc, argv, args)) return *rc;
  const bool json = args.flag("json");
  const bool verify = args.flag("verify");

  if (json) {
    std::printf("{\"files\":[");
  } else {
    std::printf("# uroce dump %s\n", args.config_line().c_str());
  }
  Summary total;
  bool read_failed = false;
  bool first_file = true;
  for (const std::string_view path_sv : args.positional()) {
    const std::string path(path_sv);
    auto records = wire::read_pcap(path);
    if (json) std::printf("%s\n{\"file\":%s,", first_file ? "" : ",", json_string(path).c_str());
    first_file = false;
    if (!records.ok()) {
      read_failed = true;
      std::fprintf(stderr, "uroce dump: %s: %s\n", path.c_str(), records.status().message());
      if (json) std::printf("\"error\":%s}", json_string(records.status().message()).c_str());
      continue;
    }
    if (json) {
      std::printf("\"frames\":[");
    } else {
      std::printf("# file %s: %zu frames\n", path.c_str(), records->size());
    }
    Summary file;
    bool first_frame = true;
    uint64_t n = 0;
    for (const wire::PcapRecord& rec : *records) {
      ++n;
      const Decoded f = decode(rec.data);
      file.add(f);
      if (wire::is_not_roce(f.err)) continue;
      if (json) {
        std::printf("%s\n%s", first_frame ? "" : ",", frame_json(n, rec.data.size(), f).c_str());
      } else {
        std::printf("%s\n", frame_text(n, rec.data.size(), f).c_str());
      }
      first_frame = false;
    }
    if (json) {
      std::printf("],\n\"summary\":%s}", summary_json(file).c_str());
    } else {
      print_summary_text(path, file);
    }
    total.add(file);
  }
  if (json) {
    std::printf("],\n\"summary\":%s}\n", summary_json(total).c_str());
  } else if (args.positional().size() > 1) {
    print_summary_text("total", total);
  }
  if (verify && !json) {
    std::printf("verify: %s\n", total.verify_failed() || read_failed ? "FAIL" : "ok");
  }
  if (verify && total.verify_failed()) {
    std::fprintf(stderr, "uroce dump: verify failed: %llu RoCE frames malformed, %llu with a bad ICRC\n",
                 static_cast<unsigned long long>(total.malformed),
                 static_cast<unsigned long long>(total.icrc_bad));
  }
  if (std::fflush(stdout) != 0) return kExitFailure;
  return read_failed || (verify && total.verify_failed()) ? kExitFailure : kExitOk;
}

}  // namespace uroce::apps
