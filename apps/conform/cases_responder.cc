// The cases with the target as responder: the tester is the requester and
// sends each request with one deviation (docs/CONFORMANCE.md). Rules cite the
// IBA Vol 1 section, and the compliance statement where the stack's own code
// cites it (stack/transport/responder.cc).
#include <array>
#include <cstring>

#include "apps/common/launch.h"
#include "apps/conform/checks.h"
#include "apps/conform/conform.h"
#include "stack/wire/aeth.h"
#include "stack/wire/headers.h"
#include "stack/wire/icrc.h"
#include "stack/wire/psn.h"

namespace uroce::apps::conform {

namespace {

using wire::AethType;
using wire::NakCode;
using wire::psn_add;

constexpr uint32_t kSmall = 64;  // bytes of the small WRITEs, READs and SENDs
constexpr uint32_t kCreditRecvs = 2;  // receives posted for resp.ack_credits_honest

bool is_ack(const Reply& r, uint32_t psn) {
  return r.d.opcode == wire::kRcAcknowledge && wire::aeth_type(r.d.aeth_syndrome) == AethType::kAck && r.d.psn == psn;
}

bool is_nak(const Reply& r, NakCode code, uint32_t psn) {
  return r.d.opcode == wire::kRcAcknowledge && wire::aeth_type(r.d.aeth_syndrome) == AethType::kNak &&
         wire::aeth_value(r.d.aeth_syndrome) == uint8_t(code) && r.d.psn == psn;
}

bool has_nak(std::span<const Reply> rs) {
  for (const Reply& r : rs) {
    if (r.d.op().has(wire::Hdr::kAeth) && wire::aeth_type(r.d.aeth_syndrome) != AethType::kAck) return true;
  }
  return false;
}

/// RDMA WRITE Only of payload at offset off of the target's region, at psn.
void write_only(Tester& t, uint32_t psn, uint32_t off, std::span<const uint8_t> payload) {
  wire::PacketDesc d = t.req(wire::kRcWriteOnly);
  d.psn = psn;
  d.reth_va = t.target().va + off;
  d.reth_rkey = t.target().rkey;
  d.reth_len = uint32_t(payload.size());
  t.send(d, payload);
}

/// RDMA READ Request of len bytes at offset off, at psn.
void read_req(Tester& t, uint32_t psn, uint32_t off, uint32_t len) {
  wire::PacketDesc d = t.req(wire::kRcReadRequest);
  d.psn = psn;
  d.reth_va = t.target().va + off;
  d.reth_rkey = t.target().rkey;
  d.reth_len = len;
  t.send(d);
}

/// FETCH_ADD of add at offset off, at psn.
void fetch_add(Tester& t, uint32_t psn, uint32_t off, uint64_t add) {
  wire::PacketDesc d = t.req(wire::kRcFetchAdd);
  d.psn = psn;
  d.atomic_va = t.target().va + off;
  d.atomic_rkey = t.target().rkey;
  d.atomic_swap_add = add;
  t.send(d);
}

/// One READ RESPONSE Only at psn carrying want, else what was seen instead.
std::optional<std::string> read_back(Tester& t, uint32_t psn, std::span<const uint8_t> want) {
  read_req(t, psn, 0, uint32_t(want.size()));
  const auto rs = t.collect(1);
  if (rs.size() == 1 && rs[0].d.opcode == wire::kRcReadResponseOnly && rs[0].d.psn == psn &&
      std::equal(want.begin(), want.end(), rs[0].payload.begin(), rs[0].payload.end())) {
    return std::nullopt;
  }
  if (rs.size() == 1 && rs[0].d.opcode == wire::kRcReadResponseOnly && rs[0].d.psn == psn) {
    return std::string("the READ back returned other data than the honest WRITE's");
  }
  return "the READ back got: " + describe(rs);
}

/// Class C (IBA 9.9.3.1.2): the one answer is a NAK with code at p, and the target's QP is in ERR.
Outcome class_c(Tester& t, NakCode code, uint32_t p) {
  const auto rs = t.collect(1);
  const std::string nak = "NAK " + std::string(wire::nak_code_name(uint8_t(code)));
  if (rs.size() != 1 || !is_nak(rs[0], code, p)) {
    return deviates(describe(rs) + " (want " + nak + strf(" psn=0x%06x)", p));
  }
  if (auto bad = qp_state_is(t, "ERR")) return deviates(nak + ", but " + *bad);
  return conforms(nak + " psn=p, QP in ERR");
}

// ---- PSN sequence

// Receive: WRITE Only at the expected PSN (ACKed), then the same again.
// Expect: an ACK for the duplicate too, not a NAK.
Outcome dup_write_reacked(Tester& t) {
  const uint32_t p = t.psn();
  const auto a = pattern(kSmall, 1);
  write_only(t, p, 0, a);
  const auto first = t.collect(1);
  if (first.size() != 1 || !is_ack(first[0], p)) return deviates("to the first WRITE: " + describe(first));
  write_only(t, p, 0, a);
  const auto dup = t.collect(1);
  if (dup.size() == 1 && is_ack(dup[0], p)) return conforms("ACK psn=p to the WRITE and ACK psn=p to its duplicate");
  return deviates("to the duplicate: " + describe(dup));
}

// Receive: SEND Only at the expected PSN (ACKed, one receive completes), then the same again.
// Expect: an ACK for the duplicate, and still one receive completion (not delivered twice).
Outcome dup_send_delivered_once(Tester& t) {
  const uint32_t p = t.psn();
  const auto a = pattern(kSmall, 17);
  for (int i = 0; i < 2; ++i) {
    t.send(t.req(wire::kRcSendOnly), a);
    const auto rs = t.collect(1);
    if (rs.size() != 1 || !is_ack(rs[0], p)) return deviates(std::string(i ? "to the duplicate: " : "to the SEND: ") + describe(rs));
  }
  TargetState st;
  std::string err;
  if (!t.wait_completions(2, st, err)) return error(err);  // waits answer_ms for a second one that must not come
  if (st.completions.size() != 1 || st.completions[0] != WcStatus::kSuccess) {
    return deviates("ACKed twice, but the receives completed: " + completions_text(st.completions));
  }
  return conforms("ACK psn=p twice; one receive completed");
}

// Receive: four WRITE Only at p+2 .. p+5 (a gap of two), then the missing p.
// Expect: one NAK PSN sequence error carrying p for the whole gap, then an ACK of p.
Outcome psn_ahead_one_nak(Tester& t) {
  const uint32_t p = t.psn();
  const auto a = pattern(kSmall, 2);
  for (uint32_t i = 2; i < 6; ++i) write_only(t, psn_add(p, i), 0, a);
  const auto naks = t.collect(1);
  if (naks.size() != 1 || !is_nak(naks[0], NakCode::kPsnSequenceError, p)) {
    return deviates("to four requests past a gap: " + describe(naks));
  }
  write_only(t, p, 0, a);
  const auto ack = t.collect(1);
  if (ack.size() != 1 || !is_ack(ack[0], p)) return deviates("one NAK, but to the missing PSN then: " + describe(ack));
  return conforms("one NAK PSN Sequence Error psn=p for four requests, then ACK psn=p");
}

// Receive: WRITE A at p (ACKed); a WRITE B to the same bytes with a PSN 2^22
// behind (outside the window of outstanding requests: an old duplicate);
// a READ of those bytes at p+1.
// Expect: no NAK for the old PSN, B not executed: the READ returns A.
Outcome psn_far_behind_not_executed(Tester& t) {
  const uint32_t p = t.psn();
  const auto a = pattern(kSmall, 3), b = pattern(kSmall, 4);
  write_only(t, p, 0, a);
  const auto first = t.collect(1);
  if (first.size() != 1 || !is_ack(first[0], p)) return deviates("to the first WRITE: " + describe(first));
  write_only(t, psn_add(p, wire::kPsnMask + 1 - (1u << 22)), 0, b);
  const auto old = t.collect(1);
  if (has_nak(old)) return deviates("a NAK for a PSN 2^22 behind: " + describe(old));
  if (auto bad = read_back(t, psn_add(p, 1), a)) return deviates("after the old PSN (" + describe(old) + "): " + *bad);
  return conforms("to the old PSN: " + describe(old) + "; the READ back returned the first WRITE's data");
}

// Receive: WRITE Only at p without AckReq, then WRITE Only at p+1 with AckReq.
// Expect: the request that asks for an ACK gets one: the last answer is an
// ACK of p+1 (the one for p may be coalesced into it); no NAK.
Outcome ack_req_answered(Tester& t) {
  const uint32_t p = t.psn();
  wire::PacketDesc d = t.req(wire::kRcWriteOnly);
  d.ack_req = false;
  d.reth_va = t.target().va;
  d.reth_rkey = t.target().rkey;
  d.reth_len = kSmall;
  t.send(d, pattern(kSmall, 18));
  write_only(t, psn_add(p, 1), kSmall, pattern(kSmall, 19));
  const auto rs = t.collect(1);
  if (rs.empty() || has_nak(rs) || !is_ack(rs.back(), psn_add(p, 1))) {
    return deviates(describe(rs) + " (want an ACK of p+1 last)");
  }
  return conforms(describe(rs));
}

// Receive: a READ of 2.5 PMTUs at p, then a WRITE Only at p+3.
// Expect: READ RESPONSE First, Middle, Last at p, p+1, p+2 (a READ takes one
// PSN per response packet), then the ACK of the WRITE at p+3.
Outcome read_multi_packet_psns(Tester& t) {
  const uint32_t p = t.psn();
  const uint32_t len = t.target().mtu * 5 / 2;
  read_req(t, p, 0, len);
  const auto rs = t.collect(3);
  const uint8_t want[] = {wire::kRcReadResponseFirst, wire::kRcReadResponseMiddle, wire::kRcReadResponseLast};
  bool ok = rs.size() == 3;
  for (uint32_t i = 0; ok && i < 3; ++i) ok = rs[i].d.opcode == want[i] && rs[i].d.psn == psn_add(p, i);
  if (!ok) return deviates("to a READ of 2.5 PMTUs: " + describe(rs) + " (want First, Middle, Last at p..p+2)");
  write_only(t, psn_add(p, 3), 0, pattern(kSmall, 22));
  const auto ack = t.collect(1);
  if (ack.size() != 1 || !is_ack(ack[0], psn_add(p, 3))) {
    return deviates("READ responses at p..p+2, then to the WRITE at p+3: " + describe(ack));
  }
  return conforms("READ RESPONSE First/Middle/Last at p..p+2, ACK of the WRITE at p+3");
}

// ---- duplicates

// Receive: WRITE A at p, READ of it at p+1, the same READ again.
// Expect: the READ answered again from its responder resource: a second
// READ RESPONSE Only at p+1 with A.
Outcome dup_read_replayed(Tester& t) {
  const uint32_t p = t.psn();
  const auto a = pattern(kSmall, 5);
  write_only(t, p, 0, a);
  const auto first = t.collect(1);
  if (first.size() != 1 || !is_ack(first[0], p)) return deviates("to the WRITE: " + describe(first));
  if (auto bad = read_back(t, psn_add(p, 1), a)) return deviates("to the READ: " + *bad);
  if (auto bad = read_back(t, psn_add(p, 1), a)) return deviates("to the duplicate READ: " + *bad);
  return conforms("READ RESPONSE Only psn=p+1 with the data, and again for the duplicate");
}

// Receive: FETCH_ADD 5 at p on a zero word, the same FETCH_ADD again, a READ of the word.
// Expect: both answered with original value 0 (the saved result), the word 5 (added once).
Outcome dup_atomic_not_reexecuted(Tester& t) {
  const uint32_t p = t.psn();
  for (int i = 0; i < 2; ++i) {
    fetch_add(t, p, 0, 5);
    const auto rs = t.collect(1);
    if (rs.size() != 1 || rs[0].d.opcode != wire::kRcAtomicAcknowledge || rs[0].d.psn != p ||
        rs[0].d.atomic_ack_orig != 0) {
      return deviates(std::string(i ? "to the duplicate" : "to the FETCH_ADD") + ": " + describe(rs) +
                      " (want Atomic Acknowledge psn=p orig=0)");
    }
  }
  std::array<uint8_t, 8> five{};
  const uint64_t v = 5;
  std::memcpy(five.data(), &v, 8);  // the target's memory holds the word in its own (here: our) byte order
  if (auto bad = read_back(t, psn_add(p, 1), five)) return deviates("the word after two FETCH_ADDs: " + *bad);
  return conforms("Atomic Acknowledge orig=0 twice, the word added once");
}

// ---- opcode sequence

// Receive: SEND Middle (one PMTU) with no SEND First before it.
// Expect: NAK Invalid Request at its PSN; the QP goes to ERR (class C).
Outcome middle_without_first(Tester& t) {
  const uint32_t p = t.psn();
  wire::PacketDesc d = t.req(wire::kRcSendMiddle);
  t.send(d, pattern(t.target().mtu, 6));
  return class_c(t, NakCode::kInvalidRequest, p);
}

// ---- lengths

// Receive: SEND Only 256 bytes longer than the receive the target posted.
// Expect: NAK Invalid Request at its PSN, the receive completed in error, QP in ERR.
Outcome send_longer_than_receive(Tester& t) {
  const uint32_t p = t.psn();
  const uint32_t len = t.target().recv_len + 256;
  if (len > t.target().mtu) return {Verdict::kNotApplicable, "the target's receives are not smaller than its PMTU"};
  t.send(t.req(wire::kRcSendOnly), pattern(len, 7));
  const Outcome nak = class_c(t, NakCode::kInvalidRequest, p);
  if (nak.verdict != Verdict::kConforms) return nak;
  TargetState st;
  std::string err;
  if (!t.state(st, err)) return error(err);
  if (st.completions.empty() || st.completions.front() == WcStatus::kSuccess) {
    return deviates(nak.seen + ", but the receive did not complete in error");
  }
  return conforms(nak.seen + strf("; the receive completed with '%s'", wc_status_str(st.completions.front())));
}

// Receive: WRITE Only of one PMTU plus 64 bytes.
// Expect: NAK Invalid Request at its PSN (an Only packet carries at most one PMTU), QP in ERR.
Outcome write_longer_than_pmtu(Tester& t) {
  const uint32_t len = t.target().mtu + kSmall;
  wire::PacketDesc d = t.req(wire::kRcWriteOnly);
  d.reth_va = t.target().va;
  d.reth_rkey = t.target().rkey;
  d.reth_len = len;
  t.send(d, pattern(len, 12));
  return class_c(t, NakCode::kInvalidRequest, t.psn());
}

// Receive: WRITE First (one PMTU of a two-PMTU WRITE), then a WRITE Only at
// the next PSN: a new request inside a message. Expect: NAK Invalid Request
// at the WRITE Only's PSN, QP in ERR.
Outcome new_request_inside_message(Tester& t) {
  const uint32_t p = t.psn();
  wire::PacketDesc first = t.req(wire::kRcWriteFirst);
  first.ack_req = false;
  first.reth_va = t.target().va;
  first.reth_rkey = t.target().rkey;
  first.reth_len = 2 * t.target().mtu;
  t.send(first, pattern(t.target().mtu, 13));
  write_only(t, psn_add(p, 1), 0, pattern(kSmall, 14));
  return class_c(t, NakCode::kInvalidRequest, psn_add(p, 1));
}

// ---- R_Key

// Receive: WRITE Only whose R_Key differs from the region's in 16 bits.
// Expect: NAK Remote Access Error at its PSN, QP in ERR.
Outcome invalid_rkey(Tester& t) {
  const uint32_t p = t.psn();
  wire::PacketDesc d = t.req(wire::kRcWriteOnly);
  d.reth_va = t.target().va;
  d.reth_rkey = t.target().rkey ^ 0x00ffff00;
  d.reth_len = kSmall;
  t.send(d, pattern(kSmall, 8));
  return class_c(t, NakCode::kRemoteAccessError, p);
}

// Receive: WRITE Only of 64 bytes whose last 32 lie past the end of the region.
// Expect: NAK Remote Access Error at its PSN, QP in ERR.
Outcome write_past_region_end(Tester& t) {
  const uint32_t p = t.psn();
  write_only(t, p, t.target().len - kSmall / 2, pattern(kSmall, 15));
  return class_c(t, NakCode::kRemoteAccessError, p);
}

// Receive: READ of 64 bytes whose last 32 lie past the end of the region.
// Expect: NAK Remote Access Error at its PSN and no READ response, QP in ERR.
Outcome read_past_region_end(Tester& t) {
  const uint32_t p = t.psn();
  read_req(t, p, t.target().len - kSmall / 2, kSmall);
  return class_c(t, NakCode::kRemoteAccessError, p);
}

/// WRITE Only of 64 bytes at the region's start with R_Key rkey; class C remote access error expected.
Outcome write_with_rkey(Tester& t, uint32_t rkey, std::string_view missing) {
  if (!rkey) return {Verdict::kNotApplicable, "the helper offers no " + std::string(missing)};
  const uint32_t p = t.psn();
  wire::PacketDesc d = t.req(wire::kRcWriteOnly);
  d.reth_va = t.target().va;
  d.reth_rkey = rkey;
  d.reth_len = kSmall;
  t.send(d, pattern(kSmall, 16));
  return class_c(t, NakCode::kRemoteAccessError, p);
}

// Receive: a WRITE to a region registered for remote read only.
// Expect: NAK Remote Access Error at its PSN, QP in ERR.
Outcome write_read_only_region(Tester& t) { return write_with_rkey(t, t.target().ro_rkey, "read-only region"); }

// Receive: a WRITE with the R_Key of a region (every right) in another PD than the QP's.
// Expect: NAK Remote Access Error at its PSN, QP in ERR.
Outcome rkey_of_other_pd(Tester& t) { return write_with_rkey(t, t.target().pd2_rkey, "region in another PD"); }

// Receive: a READ whose R_Key differs from the region's in 16 bits.
// Expect: NAK Remote Access Error at its PSN and no data, QP in ERR.
Outcome read_invalid_rkey(Tester& t) {
  const uint32_t p = t.psn();
  wire::PacketDesc d = t.req(wire::kRcReadRequest);
  d.reth_va = t.target().va;
  d.reth_rkey = t.target().rkey ^ 0x00ffff00;
  d.reth_len = kSmall;
  t.send(d);
  return class_c(t, NakCode::kRemoteAccessError, p);
}

// ---- atomics

// Receive: FETCH_ADD at a VA 4 bytes off an 8-byte boundary.
// Expect: NAK Invalid Request at its PSN, QP in ERR.
Outcome misaligned_atomic(Tester& t) {
  const uint32_t p = t.psn();
  fetch_add(t, p, 4, 1);
  return class_c(t, NakCode::kInvalidRequest, p);
}

// ---- RNR

// Receive: SEND Only with no receive posted.
// Expect: RNR NAK at its PSN whose timer field is the QP's min_rnr_timer; QP still RTS.
Outcome rnr_nak_timer(Tester& t) {
  const uint32_t p = t.psn();
  t.send(t.req(wire::kRcSendOnly), pattern(kSmall, 9));
  const auto rs = t.collect(1);
  const uint8_t want = t.target().rnr_timer;
  if (rs.empty() || rs[0].d.opcode != wire::kRcAcknowledge || rs[0].d.psn != p ||
      wire::aeth_type(rs[0].d.aeth_syndrome) != AethType::kRnrNak ||
      wire::aeth_value(rs[0].d.aeth_syndrome) != want) {
    return deviates(describe(rs) + strf(" (want RNR NAK psn=p timer=%u)", want));
  }
  if (auto bad = qp_state_is(t, "RTS")) return deviates("RNR NAK, but " + *bad);
  return conforms(strf("RNR NAK psn=p timer=%u, QP in RTS", want));
}

// ---- frames to drop

/// Sends the bad WRITE made by corrupt (a frame of B at p), expects nothing;
/// then the honest WRITE A at p (ACKed) and a READ at p+1 that returns A.
template <typename Corrupt>
Outcome dropped_silently(Tester& t, Corrupt&& corrupt) {
  const uint32_t p = t.psn();
  const auto a = pattern(kSmall, 10), b = pattern(kSmall, 11);
  wire::PacketDesc d = t.req(wire::kRcWriteOnly);
  d.reth_va = t.target().va;
  d.reth_rkey = t.target().rkey;
  d.reth_len = kSmall;
  t.send_raw(corrupt(d, b));
  const auto bad = t.collect(0);
  if (!bad.empty()) return deviates("an answer to the bad frame: " + describe(bad));
  write_only(t, p, 0, a);
  const auto good = t.collect(1);
  if (good.size() != 1 || !is_ack(good[0], p)) return deviates("to the honest WRITE after it: " + describe(good));
  if (auto wrong = read_back(t, psn_add(p, 1), a)) return deviates(*wrong);
  return conforms("no answer to the bad frame; the honest WRITE at the same PSN ACKed and its data read back");
}

// Receive: a WRITE Only whose ICRC is wrong (its last byte flipped).
Outcome bad_icrc_dropped(Tester& t) {
  return dropped_silently(t, [&t](wire::PacketDesc& d, std::span<const uint8_t> payload) {
    auto f = t.frame(d, payload);
    f.back() ^= 0xff;  // the ICRC is the last 4 bytes: the frame is longer than the Ethernet minimum
    return f;
  });
}

// Receive: a WRITE Only with a P_Key the target's QP does not hold (0x7123: limited membership, another partition).
Outcome bad_pkey_dropped(Tester& t) {
  return dropped_silently(t, [&t](wire::PacketDesc& d, std::span<const uint8_t> payload) {
    d.pkey = 0x7123;
    return t.frame(d, payload);
  });
}

/// The frame of d with payload and no pad bytes (wire::build), its BTH PadCnt
/// then set to pad and its ICRC made anew: lengths and ICRC consistent, the
/// pad count wrong unless payload + pad is whole 4-byte words and pad = 0.
std::vector<uint8_t> with_pad(wire::PacketDesc d, std::span<const uint8_t> payload, uint8_t pad) {
  d.payload_len = uint32_t(payload.size());
  d.pad = 0;
  std::vector<uint8_t> out(wire::frame_len(d));
  out.resize(wire::build(d, payload, out));
  const size_t l3 = wire::eth_len(d), bth = l3 + wire::l3_hdr_len(d.l3);
  const size_t end = wire::header_len(d) + payload.size() + wire::kIcrcBytes;
  if (out.size() < end) return out;
  out[bth + 1] = uint8_t((out[bth + 1] & ~wire::kBthPadMask) | pad << wire::kBthPadShift);
  const uint32_t icrc = wire::icrc_compute(d.l3, std::span<const uint8_t>(out).subspan(l3, end - wire::kIcrcBytes - l3));
  for (int i = 0; i < 4; ++i) out[end - wire::kIcrcBytes + i] = uint8_t(icrc >> (8 * i));
  return out;
}

// Receive: two RDMA WRITE Only frames at p whose BTH pad count does not match
// their bytes (each, lengths and ICRC otherwise consistent): (1) no bytes
// after the headers and PadCnt 3 (a pad larger than what is there; RETH
// length 0); (2) 1021 payload bytes and PadCnt 0 (payload + pad not a whole
// number of 4-byte words; RETH length 1021). Then the honest WRITE at p.
// Expect: no answer to either, nothing written, no PSN taken; the honest
// WRITE ACKed at p and its data read back.
Outcome wrong_pad_count(Tester& t) {
  const uint32_t p = t.psn();
  wire::PacketDesc d = t.req(wire::kRcWriteOnly);
  d.reth_va = t.target().va;
  d.reth_rkey = t.target().rkey;
  d.reth_len = 0;
  t.send_raw(with_pad(d, {}, 3));
  const auto first = t.collect(0);
  if (!first.empty()) return deviates("to a WRITE with PadCnt 3 and no bytes after the headers: " + describe(first));
  const uint32_t odd = t.target().mtu - 3;
  d.reth_len = odd;
  t.send_raw(with_pad(d, pattern(odd, 23), 0));
  const auto second = t.collect(0);
  if (!second.empty()) {
    return deviates(strf("nothing to PadCnt 3 without bytes, but to %u bytes with PadCnt 0: ", odd) + describe(second));
  }
  const auto a = pattern(kSmall, 24);
  write_only(t, p, 0, a);
  const auto good = t.collect(1);
  if (good.size() != 1 || !is_ack(good[0], p)) return deviates("no answer to the bad frames, but to the honest WRITE: " + describe(good));
  if (auto wrong = read_back(t, psn_add(p, 1), a)) return deviates(*wrong);
  return conforms("no answer to either bad pad count; the honest WRITE at the same PSN ACKed and its data read back");
}

/// Credits of an AETH credit code (IBA 9.7.5.1, Table 44: 0..4, then 1.5 and 2 times a power of 2 up to 32768).
constexpr uint32_t credits_of(uint8_t code) {
  if (code <= 4) return code;
  return code & 1 ? 3u << ((code - 3) / 2) : 1u << (code / 2);
}
static_assert(credits_of(5) == 6 && credits_of(6) == 8 && credits_of(7) == 12 && credits_of(10) == 32 &&
              credits_of(30) == 32768);

// Receive: a SEND Only at p with two receives posted.
// Expect: an ACK at p whose credit field is either 'invalid' (0x1F: the
// responder gives no end-to-end credits) or a count no larger than the one
// receive left.
Outcome ack_credits_honest(Tester& t) {
  const uint32_t p = t.psn();
  t.send(t.req(wire::kRcSendOnly), pattern(kSmall, 25));
  const auto rs = t.collect(1);
  if (rs.size() != 1 || !is_ack(rs[0], p)) return deviates("to the SEND: " + describe(rs) + " (want one ACK psn=p)");
  const uint8_t code = wire::aeth_value(rs[0].d.aeth_syndrome);
  if (code == wire::kAethCreditsInvalid) return conforms("ACK psn=p, credit field 0x1F (invalid: no end-to-end credits)");
  const uint32_t left = kCreditRecvs - 1;
  if (credits_of(code) > left) {
    return deviates(strf("ACK psn=p with credit code %u (%u receives), but %u receive is left", code, credits_of(code), left));
  }
  return conforms(strf("ACK psn=p with credit code %u (%u receives) for %u left", code, credits_of(code), left));
}

// Receive: a UC RDMA WRITE Only (opcode 0x2a) on the RC QP.
Outcome uc_opcode_dropped(Tester& t) {
  return dropped_silently(t, [&t](wire::PacketDesc& d, std::span<const uint8_t> payload) {
    d.opcode = wire::kUcWriteOnly;
    return t.frame(d, payload);
  });
}

constexpr Case kCases[] = {
    {.name = "resp.dup_write_reacked", .group = "responder",
     .rule = "IBA 9.7.5.2, C9-104, C9-105: a duplicate SEND/WRITE is acknowledged again, not executed",
     .expect = "ACK psn=p to the WRITE and again to its duplicate", .brk = Break::kTxFirstAnswerOnly,
     .run = dup_write_reacked},
    {.name = "resp.dup_send_delivered_once", .group = "responder",
     .rule = "IBA 9.7.5.2, C9-104, C9-105: a duplicate SEND is acknowledged again and not delivered again",
     .expect = "ACK psn=p to a SEND and to its duplicate; one receive completion",
     .brk = Break::kTxFirstAnswerOnly, .run = dup_send_delivered_once},
    {.name = "resp.psn_ahead_one_nak", .group = "responder",
     .rule = "IBA 9.7.5.2, C9-110, C9-111: a PSN ahead is NAKed (PSN sequence error, expected PSN) once per gap",
     .expect = "one NAK PSN Sequence Error psn=p for four requests past a gap; ACK once p comes",
     .brk = Break::kTxNakTwice, .run = psn_ahead_one_nak},
    {.name = "resp.psn_far_behind_not_executed", .group = "responder",
     .rule = "IBA 9.7.1, 9.7.5.2, C9-104: a PSN in the half window behind is a duplicate, never executed",
     .expect = "no NAK for a WRITE 2^22 PSNs behind; a READ returns the data of the WRITE before it",
     .brk = Break::kTxFirstAnswerOnly, .run = psn_far_behind_not_executed},
    {.name = "resp.ack_req_answered", .group = "responder",
     .rule = "IBA 9.7.5.2 (AckReq: the responder acknowledges a request that asks for it; earlier ones may be coalesced)",
     .expect = "WRITE p without AckReq, WRITE p+1 with it: the last answer an ACK of p+1, no NAK",
     .brk = Break::kRxNoAckReq, .run = ack_req_answered},
    {.name = "resp.read_multi_packet_psns", .group = "responder",
     .rule = "IBA 9.7.1, 9.7.5.2: a READ request takes one PSN for each response packet; the next request follows them",
     .expect = "READ of 2.5 PMTUs: First, Middle, Last at p..p+2; a WRITE at p+3 ACKed",
     .brk = Break::kTxFirstAnswerOnly, .run = read_multi_packet_psns},
    {.name = "resp.dup_read_replayed", .group = "responder",
     .rule = "IBA 9.7.5.2, C9-105: a duplicate READ is answered again from its responder resource",
     .expect = "READ RESPONSE Only psn=p+1 with the data, again for the duplicate",
     .brk = Break::kTxFirstAnswerOnly, .run = dup_read_replayed},
    {.name = "resp.dup_atomic_not_reexecuted", .group = "responder",
     .rule = "IBA 9.7.5.2, C9-105: a duplicate atomic gets the saved original value and is not executed again",
     .expect = "Atomic Acknowledge orig=0 to a FETCH_ADD and to its duplicate; the word added once",
     .brk = Break::kTxFirstAnswerOnly, .run = dup_atomic_not_reexecuted},
    {.name = "resp.middle_without_first", .group = "responder",
     .rule = "IBA 9.8.2.2 (opcode sequence), 9.9.3.1.2 (class C): NAK invalid request, QP to error",
     .expect = "NAK Invalid Request psn=p to a SEND Middle with no First; QP in ERR", .brk = Break::kTxNakAsAck,
     .run = middle_without_first},
    {.name = "resp.send_longer_than_receive", .group = "responder",
     .rule = "IBA 9.7.5.2 (length check), 9.9.3.1.2 (class C): NAK invalid request, receive in error, QP to error",
     .expect = "NAK Invalid Request psn=p to a SEND 256 bytes longer than the receive; receive in error; QP in ERR",
     .brk = Break::kTxNakAsAck, .run = send_longer_than_receive},
    {.name = "resp.write_longer_than_pmtu", .group = "responder",
     .rule = "IBA 9.7.5.2 (length check), C9-92: an Only packet carries at most one PMTU; 9.9.3.1.2 (class C)",
     .expect = "NAK Invalid Request psn=p to a WRITE Only of PMTU + 64 bytes; QP in ERR", .brk = Break::kTxNakAsAck,
     .run = write_longer_than_pmtu},
    {.name = "resp.new_request_inside_message", .group = "responder",
     .rule = "IBA 9.8.2.2 (opcode sequence: only Middle/Last inside a message), 9.9.3.1.2 (class C)",
     .expect = "NAK Invalid Request psn=p+1 to a WRITE Only after a WRITE First; QP in ERR", .brk = Break::kTxNakAsAck,
     .run = new_request_inside_message},
    {.name = "resp.write_past_region_end", .group = "responder",
     .rule = "IBA 9.7.5.2 (R_Key, range inside the region), 10.6.3.1, 9.9.3.1.2 (class C)",
     .expect = "NAK Remote Access Error psn=p to a WRITE whose last 32 bytes lie past the region; QP in ERR",
     .brk = Break::kTxNakAsAck, .run = write_past_region_end},
    {.name = "resp.read_past_region_end", .group = "responder",
     .rule = "IBA 9.7.5.2 (R_Key, range inside the region), 10.6.3.1, 9.9.3.1.2 (class C)",
     .expect = "NAK Remote Access Error psn=p and no data to a READ past the region's end; QP in ERR",
     .brk = Break::kTxNakAsAck, .run = read_past_region_end},
    {.name = "resp.invalid_rkey", .group = "responder",
     .rule = "IBA 9.7.5.2 (R_Key check), 10.6.3.1, 9.9.3.1.2 (class C): NAK remote access error, QP to error",
     .expect = "NAK Remote Access Error psn=p to a WRITE with a wrong R_Key; QP in ERR", .brk = Break::kTxNakAsAck,
     .run = invalid_rkey},
    {.name = "resp.read_invalid_rkey", .group = "responder",
     .rule = "IBA 9.7.5.2 (R_Key check), 10.6.3.1, 9.9.3.1.2 (class C): NAK remote access error, no data",
     .expect = "NAK Remote Access Error psn=p and no READ response to a READ with a wrong R_Key; QP in ERR",
     .brk = Break::kTxNakAsAck, .run = read_invalid_rkey},
    {.name = "resp.write_read_only_region", .group = "responder",
     .rule = "IBA 9.7.5.2 (R_Key check: access rights), 10.6.3.1, 9.9.3.1.2 (class C)",
     .expect = "NAK Remote Access Error psn=p to a WRITE into a remote-read-only region; QP in ERR",
     .brk = Break::kTxNakAsAck, .run = write_read_only_region},
    {.name = "resp.rkey_of_other_pd", .group = "responder",
     .rule = "IBA 9.7.5.2 (R_Key check: the QP's PD), 10.2.3, 9.9.3.1.2 (class C)",
     .expect = "NAK Remote Access Error psn=p to a WRITE with the R_Key of a region in another PD; QP in ERR",
     .brk = Break::kTxNakAsAck, .run = rkey_of_other_pd},
    {.name = "resp.misaligned_atomic", .group = "responder",
     .rule = "IBA 9.7.5.2 (atomic VA on an 8-byte boundary), 9.9.3.1.2 (class C): NAK invalid request",
     .expect = "NAK Invalid Request psn=p to a FETCH_ADD at VA 4 mod 8; QP in ERR", .brk = Break::kTxNakAsAck,
     .run = misaligned_atomic},
    {.name = "resp.rnr_nak_timer", .group = "responder",
     .rule = "IBA 9.7.5.2.8: no receive posted gives an RNR NAK carrying the QP's minimum RNR timer (class B)",
     .expect = "RNR NAK psn=p with timer = the QP's min_rnr_timer to a SEND with no receive; QP in RTS",
     .setup = {.recvs = 0}, .brk = Break::kTxRnrTimerZero, .run = rnr_nak_timer},
    {.name = "resp.bad_icrc_dropped", .group = "responder",
     .rule = "IBA 9.6 (packet checks), Annex A17: a packet with a bad ICRC is dropped silently",
     .expect = "no answer to a WRITE with a bad ICRC; it takes no PSN and writes nothing",
     .brk = Break::kRxAcceptBadIcrc, .run = bad_icrc_dropped},
    {.name = "resp.bad_pkey_dropped", .group = "responder",
     .rule = "IBA 9.2.4 (P_Key check), 9.6: a packet with a P_Key the QP does not hold is dropped silently",
     .expect = "no answer to a WRITE with P_Key 0x7123; it takes no PSN and writes nothing",
     .brk = Break::kRxAcceptAnyPkey, .run = bad_pkey_dropped},
    {.name = "resp.uc_opcode_dropped", .group = "responder",
     .rule = "IBA 9.6 (header checks: the opcode's service must be the QP's): a UC opcode on an RC QP is dropped silently",
     .expect = "no answer to a UC WRITE Only on the RC QP; it takes no PSN and writes nothing",
     .brk = Break::kRxAnyService, .run = uc_opcode_dropped},
    {.name = "resp.wrong_pad_count", .group = "responder",
     .rule = "IBA 9.2.3 (PadCnt pads the payload to whole 4-byte words), 9.6 (header checks): a malformed packet is dropped silently",
     .expect = "no answer to a WRITE with PadCnt 3 and no bytes, nor to one of 1021 bytes with PadCnt 0; neither takes a PSN or writes",
     .brk = Break::kRxPadUnchecked, .run = wrong_pad_count},
    {.name = "resp.ack_credits_honest", .group = "responder",
     .rule = "IBA 9.7.5.1 (AETH credit count, Table 44), 9.7.7.2 (end-to-end credits): credits 'invalid' (0x1F) or no more than the receives left",
     .expect = "the ACK of a SEND with two receives posted: credit field 0x1F, or a count of at most 1",
     .setup = {.recvs = kCreditRecvs}, .brk = Break::kTxAckCreditsOverstated, .run = ack_credits_honest},
};

}  // namespace

std::span<const Case> responder_cases() { return kCases; }

}  // namespace uroce::apps::conform
