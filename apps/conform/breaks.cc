// The broken variants of the self-test: see breaks.h.
#include "apps/conform/breaks.h"

#include <array>
#include <chrono>

#include "stack/cm/agent.h"
#include "stack/cm/mad.h"
#include "stack/wire/aeth.h"
#include "stack/wire/headers.h"
#include "stack/wire/packet.h"
#include "stack/wire/psn.h"

namespace uroce::apps::conform {

namespace {

struct BreakText {
  std::string_view name, help;
};
constexpr std::array kBreaks = {
#define UROCE_TEXT(e, s, h) BreakText{s, h},
    UROCE_CONFORM_BREAKS(UROCE_TEXT)
#undef UROCE_TEXT
};

std::span<uint8_t> bytes(rte_mbuf* m) { return {rte_pktmbuf_mtod(m, uint8_t*), m->data_len}; }

/// Offset of the BTH in a frame parsed into d.
size_t bth_off(const wire::PacketDesc& d) { return wire::eth_len(d) + wire::l3_hdr_len(d.l3); }

uint64_t steady_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

/// The IPv4 header checksum (RFC 791, RFC 1071) of h with its checksum field zero.
uint16_t ip_checksum(const wire::Ipv4Hdr& h) {
  const auto* p = reinterpret_cast<const uint8_t*>(&h);
  uint32_t sum = 0;
  for (size_t i = 0; i < sizeof h; i += 2) sum += i == 10 ? 0 : uint32_t(p[i] << 8 | p[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(~sum);
}

constexpr uint64_t kEarlyNs = 1'000'000;  // kTxResendEarly: 1 ms after the request

}  // namespace

std::string_view break_name(Break b) { return kBreaks[size_t(b)].name; }
std::string_view break_help(Break b) { return kBreaks[size_t(b)].help; }

std::optional<Break> break_from_name(std::string_view name) {
  for (size_t i = 0; i < kBreaks.size(); ++i) {
    if (kBreaks[i].name == name) return Break(i);
  }
  return std::nullopt;
}

void BreakIo::set(Break b) {
  drop_early();
  brk_ = b;
  answered_ = false;
  sent_any_ = false;
}

bool BreakIo::repad(rte_mbuf* m) {
  constexpr size_t kIp = sizeof(wire::EthHdr), kUdp = kIp + sizeof(wire::Ipv4Hdr), kBth = kUdp + sizeof(wire::UdpHdr);
  auto f = bytes(m);
  if (f.size() < kBth + sizeof(wire::Bth) || reinterpret_cast<const wire::EthHdr*>(f.data())->ether_type.get() != wire::kEtherTypeIpv4) {
    return false;
  }
  auto* ip = reinterpret_cast<wire::Ipv4Hdr*>(f.data() + kIp);
  auto* udp = reinterpret_cast<wire::UdpHdr*>(f.data() + kUdp);
  const wire::OpcodeInfo& op = wire::kOpcodes[f[kBth]];
  const size_t end = kIp + ip->total_length.get(), payload_off = kBth + op.hdr_len;
  if (ip->version_ihl != 0x45 || udp->dst_port.get() != wire::kRoceV2Port || !(op.flags & wire::kReq) ||
      !(op.flags & wire::kPayload) || end > f.size() || end < payload_off + wire::kIcrcBytes) {
    return false;
  }
  // What a stack that does not check takes: the bytes less the pad count
  // (all of them if the count is larger); padded as they should have been.
  auto* bth = reinterpret_cast<wire::Bth*>(f.data() + kBth);
  const size_t body = end - wire::kIcrcBytes - payload_off, pad = wire::bth_pad(*bth);
  const size_t len = pad <= body ? body - pad : body;
  const size_t new_end = payload_off + len + wire::pad_for(uint32_t(len)) + wire::kIcrcBytes;
  if (new_end > f.size() && !rte_pktmbuf_append(m, uint16_t(new_end - f.size()))) return false;
  f = bytes(m);
  ip = reinterpret_cast<wire::Ipv4Hdr*>(f.data() + kIp);
  udp = reinterpret_cast<wire::UdpHdr*>(f.data() + kUdp);
  bth = reinterpret_cast<wire::Bth*>(f.data() + kBth);
  bth->flags = uint8_t((bth->flags & ~wire::kBthPadMask) | wire::pad_for(uint32_t(len)) << wire::kBthPadShift);
  ip->total_length.set(uint16_t(new_end - kIp));
  udp->length.set(uint16_t(new_end - kUdp));
  ip->checksum.set(0);
  ip->checksum.set(ip_checksum(*ip));
  wire::PacketDesc d;
  if (wire::parse(f, d, {.verify_icrc = false}) != wire::ParseError::kOk) return false;
  (void)wire::finish_frame(d, f);
  return true;
}

bool BreakIo::rx_one(rte_mbuf* m) {
  if (m->nb_segs != 1) return true;
  auto f = bytes(m);
  wire::PacketDesc d;
  const wire::ParseError pe = wire::parse(f, d, {.verify_icrc = false});
  if (brk_ == Break::kRxPadUnchecked && pe == wire::ParseError::kBadPad) {
    (void)repad(m);
    return true;
  }
  if (pe != wire::ParseError::kOk) return true;
  uint8_t* const bth = f.data() + bth_off(d);
  auto* aeth = d.op().has(wire::Hdr::kAeth)
                   ? reinterpret_cast<wire::Aeth*>(bth + d.op().off[size_t(wire::Hdr::kAeth)])
                   : nullptr;
  const wire::AethType type = wire::aeth_type(d.aeth_syndrome);
  auto set_aeth = [&](uint8_t syndrome) { aeth->word.set(uint32_t(syndrome) << wire::kAethSyndromeShift | d.aeth_msn); };
  auto set_psn = [&](uint32_t psn) {
    reinterpret_cast<wire::Bth*>(bth)->psn_word.set((d.ack_req ? wire::kBthAckReqBit : 0) | (psn & wire::kBthPsnMask));
  };
  switch (brk_) {
    case Break::kRxAcceptBadIcrc: break;
    case Break::kRxAcceptAnyPkey: reinterpret_cast<wire::Bth*>(bth)->pkey.set(0xffff); break;
    case Break::kRxGhostAckTaken:
      if (!aeth || type != wire::AethType::kAck || !sent_any_ || wire::psn_cmp(d.psn, last_sent_) <= 0) return true;
      set_psn(last_sent_);
      break;
    case Break::kRxAckPsnEarly:
      if (!aeth || d.opcode != wire::kRcAcknowledge ||
          (type != wire::AethType::kAck &&
           (type != wire::AethType::kNak || wire::aeth_value(d.aeth_syndrome) != 0))) {
        return true;
      }
      set_psn(wire::psn_add(d.psn, wire::kPsnMask));
      break;
    case Break::kRxNoAckReq:
      if (!d.ack_req) return true;
      reinterpret_cast<wire::Bth*>(bth)->psn_word.set(d.psn);
      break;
    case Break::kRxAnyService:
      if ((d.opcode & 0xe0) != wire::kOpServiceUc) return true;
      *bth = uint8_t(d.opcode - wire::kOpServiceUc + wire::kOpServiceRc);
      break;
    case Break::kRxRnrTimerShort:
      if (!aeth || type != wire::AethType::kRnrNak) return true;
      set_aeth(wire::aeth_syndrome(wire::AethType::kRnrNak, 1));
      break;
    case Break::kRxNakAsAck:
      if (!aeth || (type != wire::AethType::kNak && type != wire::AethType::kReserved)) return true;
      set_aeth(wire::aeth_syndrome(wire::AethType::kAck, wire::kAethCreditsInvalid));
      break;
    case Break::kRxAnyQkey: {
      if (!d.op().has(wire::Hdr::kDeth)) return true;
      reinterpret_cast<wire::Deth*>(bth + d.op().off[size_t(wire::Hdr::kDeth)])->qkey.set(kConformQkey);
      break;
    }
    case Break::kRxCnpIgnored: return !(d.op().flags & wire::kCnpOp);
    case Break::kNone:
    case Break::kTxNakAsAck:
    case Break::kTxNakTwice:
    case Break::kTxFirstAnswerOnly:
    case Break::kTxRnrTimerZero:
    case Break::kTxNoRetransmit:
    case Break::kTxRejConsumer:
    case Break::kTxNoCmAnswer:
    case Break::kRxPadUnchecked:
    case Break::kTxResendEarly:
    case Break::kTxAckCreditsOverstated: return true;
  }
  (void)wire::finish_frame(d, f);
  return true;
}

int BreakIo::tx_one(rte_mbuf* m) {
  if (m->nb_segs != 1) return 1;
  const auto f = bytes(m);
  wire::PacketDesc d;
  if (wire::parse(f, d) != wire::ParseError::kOk) return 1;
  auto* aeth = d.op().has(wire::Hdr::kAeth)
                   ? reinterpret_cast<wire::Aeth*>(f.data() + bth_off(d) + d.op().off[size_t(wire::Hdr::kAeth)])
                   : nullptr;
  const wire::AethType type = wire::aeth_type(d.aeth_syndrome);
  const bool request = d.op().flags & wire::kReq;
  const bool resent = request && sent_any_ && wire::psn_cmp(d.psn, last_sent_) <= 0;
  if (request && !resent) {
    sent_any_ = true;
    last_sent_ = d.psn;
  }
  const bool mad = d.dest_qp == wire::kGsiQpn && d.opcode == wire::kUdSendOnly;
  switch (brk_) {
    case Break::kTxNoRetransmit: return resent ? 0 : 1;
    case Break::kTxNoCmAnswer: return mad ? 0 : 1;
    case Break::kTxRejConsumer: {
      cm::CmMad msg;
      const auto payload = f.subspan(d.payload_off, d.payload_len);
      if (!mad || cm::decode(payload, msg) != cm::CmError::kOk || !std::holds_alternative<cm::RejDesc>(msg.body)) {
        return 1;
      }
      std::get<cm::RejDesc>(msg.body).reason = cm::kRejConsumer;
      if (cm::encode(msg, payload) != cm::CmError::kOk) return 1;
      break;
    }
    case Break::kTxFirstAnswerOnly:
      if (answered_) return 0;
      answered_ = true;
      return 1;
    case Break::kTxNakTwice:
      return aeth && type == wire::AethType::kNak &&
                     wire::aeth_value(d.aeth_syndrome) == uint8_t(wire::NakCode::kPsnSequenceError)
                 ? 2
                 : 1;
    case Break::kTxNakAsAck:
      if (!aeth || type != wire::AethType::kNak) return 1;
      aeth->word.set(uint32_t(wire::aeth_syndrome(wire::AethType::kAck, wire::kAethCreditsInvalid))
                         << wire::kAethSyndromeShift |
                     d.aeth_msn);
      break;
    case Break::kTxRnrTimerZero:
      if (!aeth || type != wire::AethType::kRnrNak) return 1;
      aeth->word.set(uint32_t(wire::aeth_syndrome(wire::AethType::kRnrNak, 0)) << wire::kAethSyndromeShift |
                     d.aeth_msn);
      break;
    case Break::kTxAckCreditsOverstated:
      if (!aeth || type != wire::AethType::kAck) return 1;
      aeth->word.set(uint32_t(wire::aeth_syndrome(wire::AethType::kAck, 30)) << wire::kAethSyndromeShift | d.aeth_msn);
      break;
    case Break::kTxResendEarly:
      if (request && !resent) {
        for (Early& e : early_) {
          if (e.m) continue;
          e.m = rte_pktmbuf_copy(m, io_.tx_pool(), 0, UINT32_MAX);
          e.due_ns = steady_ns() + kEarlyNs;
          break;
        }
      }
      return 1;
    case Break::kNone:
    case Break::kRxAcceptBadIcrc:
    case Break::kRxAcceptAnyPkey:
    case Break::kRxGhostAckTaken:
    case Break::kRxAckPsnEarly:
    case Break::kRxAnyService:
    case Break::kRxNoAckReq:
    case Break::kRxRnrTimerShort:
    case Break::kRxNakAsAck:
    case Break::kRxAnyQkey:
    case Break::kRxPadUnchecked:
    case Break::kRxCnpIgnored: return 1;
  }
  (void)wire::finish_frame(d, f);
  return 1;
}

void BreakIo::send_early() {
  const uint64_t now = steady_ns();
  for (Early& e : early_) {
    if (!e.m || now < e.due_ns) continue;
    if (io_.tx_burst(&e.m, 1) != 1) rte_pktmbuf_free(e.m);
    e.m = nullptr;
  }
}

void BreakIo::drop_early() {
  for (Early& e : early_) {
    if (e.m) rte_pktmbuf_free(e.m);
    e.m = nullptr;
  }
}

uint16_t BreakIo::rx_burst(rte_mbuf** out, uint16_t n) {
  const uint16_t got = io_.rx_burst(out, n);
  if (brk_ == Break::kNone) return got;
  if (brk_ == Break::kTxResendEarly) send_early();
  uint16_t kept = 0;
  for (uint16_t i = 0; i < got; ++i) {
    if (rx_one(out[i])) {
      out[kept++] = out[i];
    } else {
      rte_pktmbuf_free(out[i]);
    }
  }
  return kept;
}

uint16_t BreakIo::tx_burst(rte_mbuf** in, uint16_t n) {
  if (brk_ == Break::kNone) return io_.tx_burst(in, n);
  if (brk_ == Break::kTxResendEarly) send_early();
  uint16_t done = 0;
  for (; done < n; ++done) {
    rte_mbuf* m = in[done];
    const int times = tx_one(m);
    if (times == 0) {
      rte_pktmbuf_free(m);
      continue;
    }
    rte_mbuf* copy = times == 2 ? rte_pktmbuf_copy(m, io_.tx_pool(), 0, UINT32_MAX) : nullptr;
    if (io_.tx_burst(&m, 1) != 1) {  // the port is full: the frame stays with the caller
      if (copy) rte_pktmbuf_free(copy);
      break;
    }
    if (copy && io_.tx_burst(&copy, 1) != 1) rte_pktmbuf_free(copy);
  }
  return done;
}

}  // namespace uroce::apps::conform
