// The tester side of `uroce conform`: the bare port, the control channel to
// the target helper, each case's setup, frames and capture (conform.h).
#include <array>
#include <chrono>
#include <cstring>
#include <utility>

#include <rte_mbuf.h>

#include "apps/common/addr_text.h"
#include "apps/common/launch.h"
#include "apps/conform/conform.h"
#include "apps/conform/control.h"
#include "stack/cm/mad.h"
#include "stack/net/frames.h"
#include "stack/net/net_headers.h"
#include "stack/wire/aeth.h"

namespace uroce::apps::conform {

namespace {

// Our QPN and first PSN in case i: a new QPN each case (the target's QP is
// new too), PSNs from near the top of the 24-bit space so that every case
// crosses the wrap to 0 within a few packets.
constexpr uint32_t kOurQpnBase = 0xc0000;
constexpr uint32_t kFirstPsn = 0xfffffd;
constexpr uint16_t kUdpSport = 0xc0f0;
// A case's capture is held in memory and written when the case ends
// (PcapWriter::open's hold_bytes): writing each frame to the file as it
// came cost 1 us of the tester's poll loop a 1 KB frame (fresh pages), and
// cc.cnp_slows_target's CNPs, sent between polls, thinned out while the
// target streamed.
constexpr size_t kHeldCaptureBytes = size_t(16) << 20;

}  // namespace

uint64_t steady_now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

namespace {

uint64_t now_ns() { return steady_now_ns(); }

/// A number the helper may leave out (0 then); nullopt if present and not a number.
std::optional<uint64_t> optional_num(const Msg& m, std::string_view key) {
  return m.get(key).empty() ? std::optional<uint64_t>(0) : m.num(key);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kConforms: return "conforms";
    case Verdict::kDeviates: return "deviates";
    case Verdict::kNotApplicable: return "not applicable";
    case Verdict::kError: return "error";
  }
  return "?";
}

std::string describe(std::span<const Reply> replies) {
  if (replies.empty()) return "nothing";
  std::string s;
  for (const Reply& r : replies) {
    if (!s.empty()) s += "; ";
    s += std::string(r.d.op().name) + strf(" psn=0x%06x", r.d.psn);
    if (r.d.op().has(wire::Hdr::kAeth)) {
      const uint8_t syn = r.d.aeth_syndrome;
      switch (wire::aeth_type(syn)) {
        case wire::AethType::kAck: s += " ACK"; break;
        case wire::AethType::kRnrNak: s += strf(" RNR NAK timer=%u", wire::aeth_value(syn)); break;
        case wire::AethType::kReserved: s += strf(" reserved syndrome 0x%02x", syn); break;
        case wire::AethType::kNak: s += " NAK " + std::string(wire::nak_code_name(wire::aeth_value(syn))); break;
      }
    }
    if (r.d.op().has(wire::Hdr::kAtomicAckEth)) s += strf(" orig=%llu", (unsigned long long)r.d.atomic_ack_orig);
    if (r.d.payload_len) s += strf(" len=%u", r.d.payload_len);
  }
  return s;
}

bool Tester::exchange(const std::string& msg, std::string& reply, std::string& err) {
  if (msg.empty()) {
    err = "control message too long";
    return false;
  }
  char out[kMsgBytes] = {};
  std::memcpy(out, msg.data(), msg.size());
  if (!cfg_.helper->send_bytes(out, sizeof out)) {
    err = "the target helper closed the control channel";
    return false;
  }
  char in[kMsgBytes];
  if (!cfg_.helper->recv_wait(in, sizeof in, cfg_.timeout_s, [this] { pump_rx(); }, err)) return false;
  reply.assign(in, strnlen(in, sizeof in));
  return true;
}

bool Tester::setup(const Case& c, uint32_t index, Break brk, std::string& refused, std::string& err) {
  our_qpn_ = kOurQpnBase + index;
  psn_ = kFirstPsn;
  pending_.clear();
  const std::string msg = format_msg(
      "setup", {{"mac", mac_str(cfg_.port->info().mac)},
                {"ip", ipv4_text(cfg_.gid)},
                {"qpn", std::to_string(our_qpn_)},
                {"psn", std::to_string(psn_)},
                {"recvs", std::to_string(c.setup.recvs)},
                {"break", std::string(break_name(brk))},
                {"type", std::string(c.setup.type)},
                {"timeout", std::to_string(c.setup.timeout)},
                {"retry_cnt", std::to_string(c.setup.retry_cnt)},
                {"rnr_retry", std::to_string(c.setup.rnr_retry)}});
  std::string text;
  if (!exchange(msg, text, err)) return false;
  const Msg r = parse_msg(text);
  if (r.verb == "refused") {
    refused = r.get("reason");
    return true;
  }
  if (r.verb == "error") {
    err = "the target helper failed the setup: " + std::string(r.get("reason"));
    return false;
  }
  const auto mac = parse_mac(r.get("mac"));
  const auto gid = parse_ip_gid(r.get("ip"), false);
  const auto qpn = r.num("qpn"), psn = r.num("psn"), rkey = r.num("rkey"), va = r.num("va"), len = r.num("len"),
             recv_len = r.num("recv_len"), mtu = r.num("mtu"), rnr = r.num("rnr_timer"), qkey = r.num("qkey"),
             cm_port = optional_num(r, "cm_port"), ro_rkey = optional_num(r, "ro_rkey"),
             pd2_rkey = optional_num(r, "pd2_rkey");
  if (r.verb != "ready" || !mac || !gid || !qpn || !psn || !rkey || !va || !len || !recv_len || !mtu || !rnr ||
      !qkey || !cm_port || *cm_port > 65535 || !ro_rkey || !pd2_rkey) {
    err = "bad answer to setup from the target helper: '" + text + "'";
    return false;
  }
  target_ = TargetSide{.mac = *mac, .gid = *gid, .qpn = uint32_t(*qpn), .psn = uint32_t(*psn),
                       .rkey = uint32_t(*rkey), .va = *va, .len = uint32_t(*len), .recv_len = uint32_t(*recv_len),
                       .mtu = uint32_t(*mtu), .rnr_timer = uint8_t(*rnr),
                       .qkey = uint32_t(*qkey), .cm_port = uint16_t(*cm_port),
                       .ro_rkey = uint32_t(*ro_rkey), .pd2_rkey = uint32_t(*pd2_rkey),
                       .cc = r.get("cc").empty() ? "unknown" : std::string(r.get("cc"))};
  return true;
}

bool Tester::state(TargetState& out, std::string& err) {
  std::string text;
  if (!exchange("state", text, err)) return false;
  const Msg r = parse_msg(text);
  if (r.verb != "state" || r.get("qp").empty()) {
    err = "bad answer to state from the target helper: '" + text + "'";
    return false;
  }
  out.qp_state = r.get("qp");
  out.completions.clear();
  for (const std::string& w : split_list(r.get("wc"))) {
    const auto v = parse_uint(w);
    if (!v || *v > uint64_t(WcStatus::kGeneralErr)) {
      err = "bad completion status in '" + text + "'";
      return false;
    }
    out.completions.push_back(WcStatus(*v));
  }
  out.conn_requests = -1;
  if (!r.get("creq").empty()) {
    const auto n = r.num("creq");
    if (!n || *n > 1000) {
      err = "bad creq in '" + text + "'";
      return false;
    }
    out.conn_requests = int(*n);
  }
  return true;
}

void Tester::quit() {
  char out[kMsgBytes] = "quit";
  (void)cfg_.helper->send_bytes(out, sizeof out);
}

wire::PacketDesc Tester::req(uint8_t opcode) const {
  wire::PacketDesc d;
  d.dst_mac = target_.mac;
  d.src_mac = cfg_.port->info().mac;
  d.l3 = wire::L3Kind::kIpv4;
  d.sgid = cfg_.gid;
  d.dgid = target_.gid;
  d.udp_sport = kUdpSport;
  d.opcode = opcode;
  d.dest_qp = target_.qpn;
  d.psn = psn_;
  d.ack_req = true;
  return d;
}

std::vector<uint8_t> Tester::frame(const wire::PacketDesc& d, std::span<const uint8_t> payload) const {
  wire::PacketDesc dd = d;
  dd.payload_len = uint32_t(payload.size());
  dd.pad = wire::pad_for(dd.payload_len);
  std::vector<uint8_t> out(wire::frame_len(dd));
  out.resize(wire::build(dd, payload, out));
  return out;
}

void Tester::send_raw(std::span<const uint8_t> f) {
  rte_mbuf* m = rte_pktmbuf_alloc(cfg_.port->io().tx_pool());
  if (!m) return;
  char* p = rte_pktmbuf_append(m, uint16_t(f.size()));
  if (!p) {
    rte_pktmbuf_free(m);
    return;
  }
  std::memcpy(p, f.data(), f.size());
  if (pcap_.is_open()) pcap_.write(f, now_ns());
  const auto t0 = std::chrono::steady_clock::now();
  while (cfg_.port->io().tx_burst(&m, 1) != 1) {
    if (ms_since(t0) > 1000) {  // a port that takes nothing for a second is gone
      rte_pktmbuf_free(m);
      return;
    }
  }
}

void Tester::answer_arp(std::span<const uint8_t> f) {
  // RFC 826: a request for our address gets a reply (a kernel or verbs
  // target resolves our MAC this way; the tester runs no stack to do it).
  if (f.size() < sizeof(wire::EthHdr) + sizeof(net::ArpHdr)) return;
  const auto& eth = *reinterpret_cast<const wire::EthHdr*>(f.data());
  if (eth.ether_type.get() != wire::kEtherTypeArp) return;
  const auto& a = *reinterpret_cast<const net::ArpHdr*>(f.data() + sizeof(wire::EthHdr));
  const uint8_t* ours = cfg_.gid.raw + 12;
  if (a.oper.get() != net::kArpOpRequest || std::memcmp(a.tpa, ours, 4) != 0) return;
  std::array<uint8_t, net::arp_frame_len(net::kNoVlan)> reply{};
  const size_t len =
      net::build_arp(reply, net::kArpOpReply, a.sha, net::kNoVlan, cfg_.port->info().mac, ours, a.sha, a.spa);
  send_raw(std::span(reply.data(), len));
}

size_t Tester::pump_rx() {
  if (on_poll_) on_poll_();
  rte_mbuf* m[32];
  const uint16_t n = cfg_.port->io().rx_burst(m, 32);
  size_t kept = 0;
  for (uint16_t i = 0; i < n; ++i) {
    const uint8_t* data = rte_pktmbuf_mtod(m[i], const uint8_t*);
    const std::span<const uint8_t> f(data, m[i]->data_len);
    const uint64_t t = now_ns();
    if (pcap_.is_open()) pcap_.write(f, t);
    answer_arp(f);
    Reply r;
    if (wire::parse(f, r.d) == wire::ParseError::kOk && r.d.src_mac == target_.mac &&
        (r.d.dest_qp == our_qpn_ || r.d.dest_qp == wire::kGsiQpn)) {
      r.payload.assign(data + r.d.payload_off, data + r.d.payload_off + r.d.payload_len);
      r.time_ns = t;
      pending_.push_back(std::move(r));
      ++kept;
    }
    rte_pktmbuf_free(m[i]);
  }
  return kept;
}

std::vector<Reply> Tester::collect(size_t want) {
  auto last = std::chrono::steady_clock::now();
  const auto start = last;
  const double cap = cfg_.answer_ms + 20.0 * cfg_.wait_ms;  // a target that keeps talking
  while (!g_stop && ms_since(start) < cap) {
    if (ms_since(last) >= cfg_.wait_ms && (pending_.size() >= want || ms_since(start) >= cfg_.answer_ms)) break;
    if (pump_rx()) last = std::chrono::steady_clock::now();
  }
  return std::exchange(pending_, {});
}

std::vector<Reply> Tester::take() {
  pump_rx();
  return std::exchange(pending_, {});
}

bool Tester::wait_completions(size_t n, TargetState& out, std::string& err) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (!state(out, err)) return false;
    if (out.completions.size() >= n || ms_since(start) >= cfg_.answer_ms || g_stop) return true;
    const auto t = std::chrono::steady_clock::now();
    while (ms_since(t) < 2) pump_rx();
  }
}

bool Tester::post(std::string_view op, uint32_t len, uint32_t count, std::string& err) {
  std::string text;
  if (!exchange(format_msg("post", {{"op", std::string(op)},
                                    {"len", std::to_string(len)},
                                    {"count", std::to_string(count)},
                                    {"rkey", "4660"},
                                    {"va", "65536"}}),
                text, err)) {
    return false;
  }
  if (parse_msg(text).verb != "posted") {
    err = "the helper did not post: '" + text + "'";
    return false;
  }
  return true;
}

void Tester::send_mad(std::span<const uint8_t> mad) {
  wire::PacketDesc d = req(wire::kUdSendOnly);
  d.dest_qp = wire::kGsiQpn;
  d.ack_req = false;
  d.deth_qkey = cm::kGsiQkey;
  d.deth_src_qp = wire::kGsiQpn;
  send(d, mad);
}

uint64_t Tester::answer(uint32_t psn, uint8_t syndrome, uint32_t msn) {
  wire::PacketDesc d = req(wire::kRcAcknowledge);
  d.psn = psn;
  d.ack_req = false;
  d.aeth_syndrome = syndrome;
  d.aeth_msn = msn;
  // Stamped before it goes: the target cannot have it earlier, so a wait
  // measured from here is never shorter than the target's own.
  const uint64_t t = now_ns();
  send(d);
  return t;
}

CaseResult Tester::run_case(const Case& c, uint32_t index, Break brk, const std::string& pcap) {
  CaseResult res{.c = &c, .pcap = pcap};
  const auto t0 = std::chrono::steady_clock::now();
  std::string refused, err;
  if (!pcap.empty()) {
    if (Status s = pcap_.open(pcap, wire::kDefaultSnaplen, kHeldCaptureBytes); !s.ok()) err = pcap + ": " + s.message();
  }
  if (err.empty() && setup(c, index, brk, refused, err)) {
    res.out = refused.empty() ? c.run(*this) : Outcome{Verdict::kNotApplicable, "the helper refused: " + refused};
  } else {
    res.out = {Verdict::kError, "the case could not run: " + err};
  }
  on_poll_ = nullptr;
  if (Status s = pcap_.close(); !s.ok()) {
    res.out = {Verdict::kError, "capture " + pcap + ": " + s.message()};
  }
  res.ms = ms_since(t0);
  return res;
}

}  // namespace uroce::apps::conform
