// Selective repeat and spraying, the responder's side (selective.h,
// docs/LOSS_RECOVERY.md "How it works"): SEND/WRITE packets up to a window
// past epsn checked and placed at once by their placement header, their PSNs
// held and their messages completed in order; READ and atomic requests run
// at epsn only, held (and SACKed) when they come ahead; every ACK with a SACK
// block of the held PSNs, on the path of the request that asked for it; READ
// responses sprayed over the paths from the request's, and the runs of them
// a requester asks for again.
#include "stack/transport/selective.h"

#include <algorithm>
#include <cstring>

#include "stack/transport/frame.h"
#include "stack/transport/qp.h"
#include "stack/wire/aeth.h"
#include "stack/wire/psn.h"

namespace uroce::transport {

namespace {

using wire::psn_add;
using wire::psn_cmp;
using wire::psn_diff;
using wire::psn_prev;

// Where a SEND/WRITE packet's data goes, from its placement header.
struct Place {
  wire::Placement h;
  const uint8_t* data = nullptr;
  uint32_t len = 0;       // data bytes
  uint32_t off = 0;       // of the message
  uint32_t rq_index = 0;  // SEND, WRITE with immediate: the receive WQE's RQ ring index
  bool has_rq = false;    // rq_index is set
};

// The checks of IBA 9.7.5.2 (opcode sequence, access, resources, length,
// R_Key) for one packet on its own, by its placement header. kDone if the
// packet may be placed, else the error state it meets.
RespState check(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame, Place& pl) {
  const uint32_t flags = pkt.op().flags;
  const uint8_t* payload = frame + pkt.payload_off;
  if (!wire::read_placement({payload, pkt.payload_len}, pl.h) || pl.h.msg_len > kMaxMsgBytes) {
    return RespState::kErrLength;
  }
  pl.data = payload + wire::kPlaceHdrBytes;
  pl.len = pkt.payload_len - wire::kPlaceHdrBytes;
  const uint32_t seg = seg_bytes(qp, flags);
  const uint32_t n = pkts_for(pl.h.msg_len, seg);
  const uint32_t idx = psn_diff(pkt.psn, pl.h.first_psn);
  if (psn_cmp(pkt.psn, pl.h.first_psn) < 0 || idx >= n) return RespState::kErrMissingOpcodeFirst;
  if (bool(flags & wire::kFirst) != (idx == 0)) return RespState::kErrMissingOpcodeFirst;
  if (bool(flags & wire::kLast) != (idx == n - 1)) return RespState::kErrMissingOpcodeLast;
  pl.off = idx * seg;
  if (pl.len != std::min(seg, pl.h.msg_len - pl.off)) return RespState::kErrLength;
  if (flags & wire::kWrite) {
    if (!(qp.attr.qp_access_flags & kAccessRemoteWrite)) return RespState::kErrUnsupportedOpcode;
    if (!env.mrs.check(pl.h.rkey, qp.pd, pl.h.va + pl.off, pl.len, kAccessRemoteWrite)) {
      return RespState::kErrRkeyViolation;
    }
  }
  if (!(flags & (wire::kSend | wire::kRwr))) return RespState::kDone;
  // The receive WQE the message takes, by its sequence number: posted yet?
  const uint32_t ahead = pl.h.recv_seq - qp.ext->resp.recv_done;
  if (ahead >= qp.rq.ring.size()) return RespState::kErrRnr;
  pl.rq_index = qp.rq.ring.tail() + ahead;
  pl.has_rq = true;
  if (!(flags & wire::kSend)) return RespState::kDone;
  const RecvWqe& w = qp.rq.ring.at(pl.rq_index);
  if (uint64_t(pl.off) + pl.len > w.length) return RespState::kErrLength;
  if (!sges_valid(env, qp.pd, qp.rq.sges_of(pl.rq_index), w.num_sge, kAccessLocalWrite)) {  // as take_rwqe
    return RespState::kErrMalformedWqe;
  }
  return RespState::kDone;
}

// The receive WQE at the head of the RQ becomes the responder's message in
// progress (ResponderState::rwqe), for its completion or its error.
void take_front_rwqe(QpImpl& qp) {
  ResponderState& s = qp.resp;
  s.rwqe = qp.rq.ring.front();
  std::copy_n(qp.rq.sges_of(qp.rq.ring.tail()), s.rwqe.num_sge, qp.rwqe_sges.get());
  qp.rq.ring.pop();
  s.has_rwqe = true;
  ++qp.ext->resp.recv_done;
}

// The message whose Last is at psn completes (in order: epsn has reached it).
// False if that failed and the QP is in error.
bool complete_message(Env& env, QpImpl& qp, uint32_t psn, const SrLast& l) {
  ResponderState& s = qp.resp;
  const uint32_t flags = wire::kOpcodes[l.opcode].flags;
  wire::PacketDesc d;  // what completion reads of the Last packet
  d.opcode = l.opcode;
  d.psn = psn;
  d.se = l.se;
  d.imm = l.imm_or_rkey;
  d.ieth_rkey = l.imm_or_rkey;
  if (flags & wire::kRwr) {
    if (qp.rq.ring.empty()) {  // cannot be: check() saw it posted, and only this takes it
      responder_error(env, qp, d, RespState::kErrMalformedWqe);
      return false;
    }
    take_front_rwqe(qp);
    s.rwqe_off = s.write_len = l.msg_len;
    // IBA 10.6.6: SEND with Invalidate executes as its message completes.
    if ((flags & wire::kInv) && !env.mrs.invalidate(l.imm_or_rkey, qp.pd, true)) {
      responder_error(env, qp, d, RespState::kErrInvalidateRkey);
      return false;
    }
  }
  s.msn = psn_add(s.msn, 1);  // IBA 9.7.6.1.1
  env.inc(Counter::rdma_recvs);
  return responder_complete(env, qp, d);
}

// The request a READ or atomic response answers came on path sport: its
// responses go back over it (and the paths after it, Paths::response_path).
void record_res_path(QpImpl& qp, uint8_t res_slot, const wire::PacketDesc& pkt) {
  const RespRes& res = qp.resp.res[res_slot];
  if ((pkt.op().flags & (wire::kRead | wire::kAtomic)) && res.kind && res.first_psn == pkt.psn) {
    qp.ext->resp.res_path[res_slot] = qp.ext->paths.index(pkt.udp_sport);
  }
}

// Runs a READ or atomic request at epsn (the go-back-N machine), noting its path.
void run_rd_atomic(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  const uint8_t res_slot = qp.resp.res_head;
  responder_run(env, qp, pkt, frame);
  record_res_path(qp, res_slot, pkt);
}

// Takes the READ or atomic request held for psn into rd; false if none is.
bool take_held_request(SrResponder& x, uint32_t psn, wire::PacketDesc& rd) {
  for (uint32_t i = 0; i < x.rd_count; ++i) {
    if (x.rd_held[i].psn != psn) continue;
    rd = x.rd_held[i];
    x.rd_held[i] = x.rd_held[--x.rd_count];
    return true;
  }
  return false;
}

// A READ or atomic request ahead of epsn, inside the window: held until
// epsn reaches it, and SACKed at once; the requester does not send it again.
// False if the hold is full.
bool hold_request(Env& env, QpImpl& qp, const wire::PacketDesc& pkt) {
  SrResponder& x = qp.ext->resp;
  if (x.held.test(pkt.psn)) {  // a duplicate of one held: the current SACK
    env.inc(Counter::duplicate_request);
  } else if (x.rd_count == kSrResources) {
    return false;
  } else {
    x.rd_held[x.rd_count++] = pkt;
    x.held.set(pkt.psn);
    env.inc(Counter::sr_ooo_placed);
  }
  responder_set_ack(env, qp, wire::kAethAck, psn_prev(qp.resp.epsn));
  return true;
}

// epsn moves over every contiguous held PSN, completing the messages whose
// Last it passes. from: where epsn was before the packet at hand (a READ
// moves it over its response PSNs; anything held there is stale).
void advance(Env& env, QpImpl& qp, uint32_t from) {
  ResponderState& s = qp.resp;
  SrResponder& x = qp.ext->resp;
  wire::PacketDesc rd;
  for (uint32_t p = from, k = 0; p != s.epsn && k < kSrWindowPsns; p = psn_add(p, 1), ++k) x.held.clear(p);
  while (x.held.test(s.epsn) && qp.state != QpState::kErr) {
    const uint32_t p = s.epsn;
    x.held.clear(p);
    if (take_held_request(x, p, rd)) {  // a READ or atomic that came ahead: its turn
      run_rd_atomic(env, qp, rd, nullptr);
      for (uint32_t q = psn_add(p, 1), k = 0; q != s.epsn && k < kSrWindowPsns; q = psn_add(q, 1), ++k) x.held.clear(q);
      continue;
    }
    s.epsn = psn_add(p, 1);
    const SrLast l = x.last[sr_slot(p)];
    const uint32_t flags = wire::kOpcodes[l.opcode].flags;
    s.msg_kind = (flags & wire::kLast) ? 0u : flags & (wire::kSend | wire::kWrite);
    if ((flags & wire::kLast) && !complete_message(env, qp, p, l)) return;
  }
}

// A SEND/WRITE packet at or past epsn, inside the window.
void place(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  ResponderState& s = qp.resp;
  SrResponder& x = qp.ext->resp;
  const uint32_t flags = pkt.op().flags;
  const bool at_epsn = pkt.psn == s.epsn;
  if (x.held.test(pkt.psn)) {  // a duplicate of a PSN held: the current SACK
    env.inc(Counter::duplicate_request);
    responder_set_ack(env, qp, wire::kAethAck, psn_prev(s.epsn));
    return;
  }
  Place pl;
  const RespState err = check(env, qp, pkt, frame, pl);
  if (err != RespState::kDone) {
    // Out of order: dropped, not SACKed; resent, it meets the same check at
    // epsn and gets the standard NAK there (C9-111 for RNR).
    if (!at_epsn) {
      env.inc(Counter::sr_dropped_ooo);
      return;
    }
    s.nak_sent = false;
    if (pl.has_rq && pl.rq_index == qp.rq.ring.tail()) take_front_rwqe(qp);  // the error completes it
    responder_error(env, qp, pkt, err);
    return;
  }
  if (pl.len) {
    if (flags & wire::kWrite) std::memcpy(reinterpret_cast<void*>(pl.h.va + pl.off), pl.data, pl.len);
    else copy_to_sges(qp.rq.sges_of(pl.rq_index), qp.rq.ring.at(pl.rq_index).num_sge, pl.off, pl.data, pl.len);
  }
  x.held.set(pkt.psn);
  x.last[sr_slot(pkt.psn)] = SrLast{pl.h.msg_len, (flags & wire::kInv) ? pkt.ieth_rkey : pkt.imm, pkt.opcode, pkt.se};
  const uint32_t from = s.epsn;
  if (at_epsn) {
    s.nak_sent = false;
    advance(env, qp, from);
    if (qp.state == QpState::kErr) return;
  } else {
    env.inc(Counter::sr_ooo_placed);
  }
  // SACK at once out of order (the requester learns of a gap in one round
  // trip), on AckReq, and when a gap closes.
  if (!at_epsn || pkt.ack_req || psn_diff(s.epsn, from) > 1) {
    responder_set_ack(env, qp, wire::kAethAck, psn_prev(s.epsn));
  }
}

// The SACK block's bitmap for what is held past epsn into bits (bit i: PSN
// epsn + i); returns its length in bytes (a multiple of 4), 0 if nothing is held.
uint32_t sack_bitmap(const SrResponder& x, uint32_t epsn, uint8_t* bits) {
  uint32_t top = 0;
  std::memset(bits, 0, kSrWindowPsns / 8);
  for (uint32_t i = 1; i < kSrWindowPsns; ++i) {
    if (!x.held.test(psn_add(epsn, i))) continue;
    bits[i / 8] |= uint8_t(1u << (i % 8));
    top = i;
  }
  return top ? (top / 32 + 1) * 4 : 0;
}

// A request packet of a selective-repeat QP.
void sr_responder_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  const uint32_t from = qp.resp.epsn;
  const uint32_t ahead = psn_diff(pkt.psn, from);
  if (psn_cmp(pkt.psn, from) < 0) return responder_run(env, qp, pkt, frame);  // duplicates, as go-back-N
  if (ahead >= kSrWindowPsns) {
    env.inc(Counter::sr_dropped_ooo);
    return;
  }
  if (pkt.op().flags & (wire::kSend | wire::kWrite)) return place(env, qp, pkt, frame);
  // READ and atomics run in order only; out of order they are held. If the
  // hold is full, one is dropped (sent again) and the gap before it is NAKed
  // as go-back-N NAKs it (a PSN sequence error, once per gap, C9-111): the
  // requester takes the NAK as evidence of a loss, not as a go-back-N retry.
  if (ahead) {
    if (hold_request(env, qp, pkt)) return;
    env.inc(Counter::sr_dropped_ooo);
    return responder_run(env, qp, pkt, frame);
  }
  run_rd_atomic(env, qp, pkt, frame);
  if (qp.state == QpState::kErr) return;
  const uint32_t after = qp.resp.epsn;
  advance(env, qp, from);
  // PSNs held past the READ or atomic completed: acknowledge them (after its
  // response, which the transmit turn sends first).
  if (qp.resp.epsn != after) responder_set_ack(env, qp, wire::kAethAck, psn_prev(qp.resp.epsn));
}

}  // namespace

void ext_responder_rx(Env& env, QpImpl& qp, const wire::PacketDesc& pkt, const uint8_t* frame) {
  QpExtState& x = *qp.ext;
  x.resp.ack_sport = pkt.udp_sport;  // the answer goes back over the request's path
  if (x.cfg.selective_repeat) return sr_responder_rx(env, qp, pkt, frame);
  if (psn_cmp(pkt.psn, qp.resp.epsn) < 0) return responder_run(env, qp, pkt, frame);  // a duplicate
  run_rd_atomic(env, qp, pkt, frame);
}

bool ext_send_ack(Env& env, QpImpl& qp) {
  QpExtState& x = *qp.ext;
  const ResponderState& s = qp.resp;
  wire::PacketDesc d;
  fill_qp_path(env.net, qp, d);
  d.opcode = wire::kRcAcknowledge;
  d.psn = s.ack_psn;
  d.aeth_syndrome = s.ack_syndrome;
  d.aeth_msn = s.ack_msn;
  uint8_t bits[kSrWindowPsns / 8];
  uint32_t bitmap_bytes = 0;
  if (x.cfg.selective_repeat && wire::aeth_type(s.ack_syndrome) == wire::AethType::kAck) {
    // The state at the time the ACK leaves: never older than what asked for it.
    d.psn = psn_prev(s.epsn);
    d.aeth_msn = s.msn;
    bitmap_bytes = sack_bitmap(x.resp, s.epsn, bits);
    if (bitmap_bytes) d.payload_len = uint32_t(sizeof(wire::SackHdr)) + bitmap_bytes;
  }
  if (x.resp.ack_sport) d.udp_sport = x.resp.ack_sport;
  rte_mbuf* m = nullptr;
  uint8_t* payload = begin_frame(env, d, &m);
  if (!payload) return false;
  if (bitmap_bytes) {
    auto* h = reinterpret_cast<wire::SackHdr*>(payload);
    h->kind = wire::kSackKind;
    h->reserved = 0;
    h->bitmap_bytes.set(uint16_t(bitmap_bytes));
    std::memcpy(payload + sizeof(wire::SackHdr), bits, bitmap_bytes);
    env.inc(Counter::sr_sacks_sent);
  }
  end_frame(env, d, m);
  return true;
}

void ext_read_rerequest(Env& env, QpImpl& qp, const RespRes& res, const wire::PacketDesc& pkt) {
  SrResponder& x = qp.ext->resp;
  const uint32_t mtu = qp.mtu();
  const uint64_t off = uint64_t(psn_diff(pkt.psn, res.first_psn)) * mtu;
  // It must name the rest of the READ from its PSN on, or a part of that
  // (rxe checks the same), under the READ's R_Key; else it is dropped (class D).
  if (pkt.reth_rkey != res.rkey || pkt.reth_va != res.word + off || off + pkt.reth_len > res.length ||
      x.run_count == kSrRuns) {
    env.inc(Counter::dup_rd_atomic_dropped);
    return;
  }
  const uint32_t n = pkt.reth_len ? pkts_for(pkt.reth_len, mtu) : 1;
  SrRun& run = x.runs[(x.run_head + x.run_count++) % kSrRuns];
  run = SrRun{res.first_psn, pkt.psn, pkt.psn, psn_add(pkt.psn, n - 1), qp.ext->paths.index(pkt.udp_sport),
              uint8_t(&res - qp.resp.res.data())};
  mark_ready(env, qp);
}

uint16_t ext_response_sport(const QpImpl& qp, const RespRes& res, uint32_t psn) {
  const QpExtState& x = *qp.ext;
  if (x.paths.n == 1) return 0;
  const uint16_t req = x.resp.res_path[size_t(&res - qp.resp.res.data())];
  return x.paths.sport(x.paths.response_path(req, res.first_psn, psn));
}

RunsTx ext_send_runs(Env& env, QpImpl& qp) {
  QpExtState& x = *qp.ext;
  SrResponder& r = x.resp;
  while (r.run_count) {
    SrRun& run = r.runs[r.run_head];
    const RespRes& res = qp.resp.res[run.res];
    // Still the READ it was asked of (a resource is recycled by a later READ).
    if (res.kind == wire::kRead && res.first_psn == run.read_first && psn_cmp(run.cur, run.end) <= 0) {
      if (!pacer_allows(env, qp)) return RunsTx::kPaced;
      const uint16_t sport = x.paths.n > 1 ? x.paths.sport(x.paths.response_path(run.path, run.first, run.cur)) : 0;
      switch (responder_send_response(env, qp, res, run.cur, sport)) {
        case RespSend::kNoRoom: return RunsTx::kNoRoom;
        case RespSend::kGone: run.cur = psn_add(run.end, 1); break;
        case RespSend::kSent: run.cur = psn_add(run.cur, 1); break;
      }
      if (psn_cmp(run.cur, run.end) <= 0) continue;
    }
    r.run_head = uint8_t((r.run_head + 1) % kSrRuns);
    --r.run_count;
  }
  return RunsTx::kDone;
}

}  // namespace uroce::transport
