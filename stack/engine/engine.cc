// The engine step (DESIGN "Data flow"): rx_burst -> parse once -> per-reason
// drop counters -> address checks -> QP lookup by BTH DestQP -> responder
// (requests) or completer (responses), then the timers due at now_ns, then
// the transmit turns of ready QPs (round-robin, bounded per poll), then one
// tx_burst. Frames the port refuses stay staged for the next poll.
// Congestion control meets the engine here: CE-marked packets and CNPs go to
// their QP's notification and reaction points (stack/transport/cnp.h), and
// the pacing timers put QPs the pacer held back on the transmit schedule.
#include <rte_mbuf.h>

#include <algorithm>
#include <span>

#include "stack/device/context.h"
#include "stack/transport/cnp.h"
#include "stack/wire/packet.h"

namespace uroce {

namespace {

using transport::QpImpl;

// One poll receives as many frames as it may send: with a smaller receive
// burst a responder that answers every frame it reads falls behind a peer
// that sends a full transmit stage a poll, its receive ring fills, and every
// frame it reads has gone cold in the cache (engine_bench engine/qps/1000/32:
// 392 ns a WRITE with 32, 267 ns with 64; docs/PERFORMANCE.md "Many QPs").
constexpr uint16_t kRxBurst = net::TxStage::kMaxFrames;
constexpr uint32_t kPktsPerQpTurn = 16;  // requester packets per QP per scheduling turn

// The one map from parse errors to drop counters.
Counter drop_counter(wire::ParseError e) {
  switch (e) {
    case wire::ParseError::kNotIp:
    case wire::ParseError::kNotUdp:
    case wire::ParseError::kNotRocePort: return Counter::rx_drop_not_roce;
    case wire::ParseError::kShort: return Counter::rx_drop_short;
    case wire::ParseError::kBadIpVersion: return Counter::rx_drop_bad_ip_version;
    case wire::ParseError::kIpOptions: return Counter::rx_drop_ip_options;
    case wire::ParseError::kIpFragment: return Counter::rx_drop_ip_fragment;
    case wire::ParseError::kBadIpChecksum: return Counter::rx_drop_bad_ip_checksum;
    case wire::ParseError::kLengthMismatch: return Counter::rx_drop_length_mismatch;
    case wire::ParseError::kBadTver: return Counter::rx_drop_bad_bth_tver;
    case wire::ParseError::kUnknownOpcode: return Counter::rx_drop_unknown_opcode;
    case wire::ParseError::kBadPad: return Counter::rx_drop_bad_pad_count;
    case wire::ParseError::kBadIcrc: return Counter::rx_drop_bad_icrc;
    case wire::ParseError::kOk:
    case wire::ParseError::kCount: break;
  }
  return Counter::rx_drop_short;
}

uint32_t service_flag(QpType t) {
  switch (t) {
    case QpType::kRc: return wire::kRc;
    case QpType::kUc: return wire::kUc;
    case QpType::kUd: return wire::kUd;
  }
  return 0;
}

bool receives(QpState s) {  // IBA 10.3.1: the receive side works from RTR on, and in SQD/SQE
  return s == QpState::kRtr || s == QpState::kRts || s == QpState::kSqd || s == QpState::kSqe;
}

// DCQCN reaction point: a CNP cuts its QP's rate (QPs without DCQCN only count it).
void rx_cnp(Context& ctx, const wire::PacketDesc& d) {
  ctx.counters.inc(Counter::rcvd_cnp);
  QpImpl* qp = qp_of_qpn(ctx, d.dest_qp);
  if (!qp) return ctx.counters.inc(Counter::rp_cnp_ignored);
  transport::Env env = ctx.env(&qp_counters_of(ctx, *qp));
  transport::cnp_rx(env, *qp, d);
}

// The part of receive that concerns one QP; counted in its block too.
void rx_qp(Context& ctx, transport::Env& env, QpImpl& qp, const wire::PacketDesc& d, const uint8_t* frame) {
  const uint32_t flags = d.op().flags;
  // IBA 9.2.4: the P_Key must match ours, ignoring the membership bit.
  if ((d.pkey & 0x7fff) != (transport::kDefaultPkey & 0x7fff)) return env.inc(Counter::rx_drop_bad_pkey);
  if (!(flags & service_flag(qp.qp_type))) return env.inc(Counter::rx_drop_opcode_mismatch);
  // IBA 9.6 (packet header validation; rxe's check_addr): a connected QP
  // takes packets only from its peer, the GID its address vector names.
  // Anyone else who learns the QPN and PSN could otherwise write into the
  // connection (RC BTH carries no source QPN, so the address is the check).
  if (qp.qp_type != QpType::kUd && d.sgid != qp.attr.ah_attr.dgid) return env.inc(Counter::rx_drop_wrong_src);
  // The NP sits at the receiver of the congested data, whichever role sent
  // it: CE on a request (SEND/WRITE data, or a READ request) goes to the
  // requester's RP, CE on a response (READ response data) to the responder's,
  // which paces its READ responses (responder.cc responder_tx).
  const bool ce = d.ecn() == 3 && ctx.cfg.cc.np_enabled && qp.qp_type != QpType::kUd;
  if (flags & wire::kReq) {
    if (!receives(qp.state)) return env.inc(Counter::rx_drop_qp_state);
    if (ce) transport::notify_congestion(env, qp, ctx.cfg.cc.cnp);
    transport::responder_rx(env, qp, d, frame);
  } else {
    if (qp.state != QpState::kRts && qp.state != QpState::kSqd) return env.inc(Counter::rx_drop_qp_state);
    if (ce) transport::notify_congestion(env, qp, ctx.cfg.cc.cnp);
    transport::completer_rx(env, qp, d, frame);
  }
}

// A frame that parsed as RoCE: address checks, then the QP's roles.
void rx_roce(Context& ctx, const wire::PacketDesc& d, const uint8_t* frame) {
  // Ours: the device MAC or the source MAC of any GID table entry (a GID may
  // sit on a VLAN interface with a MAC of its own).
  if (d.dst_mac != ctx.mac && !ctx.net->gids().owns_mac(d.dst_mac)) return ctx.counters.inc(Counter::rx_drop_wrong_mac);
  const auto gid_type = d.l3 == wire::L3Kind::kGrh ? net::GidType::kRoceV1 : net::GidType::kRoceV2;
  const uint16_t vlan = d.has_vlan ? uint16_t(d.vlan_tci & 0x0fff) : net::kNoVlan;
  if (!ctx.net->gids().find(d.dgid, vlan, gid_type)) return ctx.counters.inc(Counter::rx_drop_wrong_gid);
  const uint32_t flags = d.op().flags;
  if (flags & wire::kCnpOp) return rx_cnp(ctx, d);
  if (d.dest_qp == wire::kGsiQpn) {  // QP1: the connection manager's, if it has started
    if (!ctx.qp1) return ctx.counters.inc(Counter::rx_drop_unknown_qp);
    return ctx.qp1->rx(d, frame);
  }
  QpImpl* qp = qp_of_qpn(ctx, d.dest_qp);
  if (!qp) return ctx.counters.inc(Counter::rx_drop_unknown_qp);
  QpCounters& qc = qp_counters_of(ctx, *qp);
  qc.inc(Counter::rcvd_pkts);
  transport::Env env = ctx.env(&qc);
  rx_qp(ctx, env, *qp, d, frame);
}

// Keeps a non-RoCE frame for rx_non_roce (DeviceConfig::app_rx_ring).
// Returns true if the ring took it (the caller must not free it).
bool keep_for_app(Context& ctx, rte_mbuf* m) {
  if (ctx.app_rx.empty()) {
    ctx.counters.inc(Counter::rx_drop_not_roce);
    return false;
  }
  if (ctx.app_rx_n == ctx.app_rx.size()) {
    ctx.counters.inc(Counter::rx_drop_app_ring_full);
    return false;
  }
  ctx.app_rx[(ctx.app_rx_head + ctx.app_rx_n++) % ctx.app_rx.size()] = m;
  ctx.counters.inc(Counter::rx_to_app);
  return true;
}

// A received frame, parsed. poll parses one frame ahead of the one it
// handles, so that with thousands of QPs the next frame's QP state is on its
// way into the cache while this frame is handled. Only a poll that received
// frames makes the two it needs: each sets a whole PacketDesc (192
// bytes), which made an empty poll, a poll-mode loop's most common, 40 %
// dearer (engine_bench engine/idle: 18.5 against 13.3 ns on AMD Zen 4).
struct RxFrame {
  bool multiseg = false;
  wire::ParseError e = wire::ParseError::kOk;
  wire::PacketDesc d;
};

void rx_parse(Context& ctx, rte_mbuf* m, const wire::ParseOptions& opt, RxFrame& f) {
  f.multiseg = m->nb_segs != 1;
  if (f.multiseg) return;
  f.e = wire::parse({rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m)}, f.d, opt);
  if (f.e != wire::ParseError::kOk) return;
  const uint32_t slot = slot_of_qpn(ctx, f.d.dest_qp);
  if (slot == UINT32_MAX) return;
  if (const QpImpl* qp = ctx.qps.at(slot)) {
    transport::prefetch_qp(*qp);
    __builtin_prefetch(&ctx.qp_counters[slot]);
    __builtin_prefetch(&ctx.qp_counters_gen[slot]);
  }
}

// Returns true if the frame was kept (for the application), false if the
// caller frees it.
bool rx_one(Context& ctx, rte_mbuf* m, const RxFrame& f) {
  if (f.multiseg) {
    ctx.counters.inc(Counter::rx_drop_multiseg);
    return false;
  }
  const auto* frame = rte_pktmbuf_mtod(m, const uint8_t*);
  const wire::ParseError e = f.e;
  const wire::PacketDesc& d = f.d;
  if (e != wire::ParseError::kOk) {
    // ARP, IPv6 ND and ICMP echo go to the addressing layer; replies join this poll's burst.
    // Anything else that is not RoCE belongs to the application if it asked for it.
    if (wire::is_not_roce(e)) return !ctx.net->handle(m, ctx.now_ns, ctx.tx) && keep_for_app(ctx, m);
    ctx.counters.inc(drop_counter(e));
    return false;
  }
  rx_roce(ctx, d, frame);
  return false;
}

// One QP's transmit turn: responses first (they are ordered before later
// requests' ACKs), then requests. Returns true if it has more to send now.
bool tx_turn(transport::Env& env, QpImpl& qp) {
  if (transport::responder_tx(env, qp)) return true;
  return transport::requester_tx(env, qp, kPktsPerQpTurn);
}

}  // namespace

uint16_t rx_non_roce(Context* ctx, rte_mbuf** out, uint16_t n) {
  Context& c = *ctx;
  uint16_t k = 0;
  for (; k < n && c.app_rx_n; ++k, --c.app_rx_n) {
    out[k] = c.app_rx[c.app_rx_head];
    c.app_rx_head = uint32_t((c.app_rx_head + 1) % c.app_rx.size());
  }
  return k;
}

uint32_t poll(Context* ctx, uint64_t now_ns) {
  Context& c = *ctx;
  c.now_ns = now_ns;

  rte_mbuf* rx[kRxBurst];
  const uint16_t n_rx = c.io.rx_burst(rx, kRxBurst);
  if (n_rx && c.cfg.clock) {  // the frames are dated when taken (DeviceConfig::clock)
    now_ns = std::max(now_ns, c.cfg.clock(c.cfg.clock_ctx));
    c.now_ns = now_ns;
  }
  if (n_rx) {
    const wire::ParseOptions opt{.verify_icrc = !c.io.caps().rx_icrc_checked};
    RxFrame f[2];
    rx_parse(c, rx[0], opt, f[0]);
    for (uint16_t i = 0; i < n_rx; ++i) {
      if (i + 1 < n_rx) rx_parse(c, rx[i + 1], opt, f[(i + 1) & 1]);
      c.counters.inc(Counter::rcvd_pkts);
      if (!rx_one(c, rx[i], f[i & 1])) rte_pktmbuf_free(rx[i]);
    }
  }

  c.timers.advance(now_ns, [&c](uint32_t index) {
    if (QpImpl* qp = c.qps.at(index)) {
      transport::Env env = c.env(&qp_counters_of(c, *qp));
      transport::completer_timer(env, *qp);
    }
  });
  c.pace_timers.advance(now_ns, [&c](uint32_t index) {
    if (c.qps.at(index)) c.ready.mark(index);  // the pacer lets it send again
  });
  c.net->poll(now_ns, c.tx);  // ARP / neighbour solicitations due now
  if (c.qp1) c.qp1->poll(now_ns);  // CM timers and MADs to send

  // Each QP ready at the start of this poll gets one turn; those with more to
  // send go to the back of the ring. While one QP takes its turn, the next
  // QP's WQE and the one after's state are on their way into the cache.
  for (uint32_t n = c.ready.size(); n && !c.tx.full(); --n) {
    const uint32_t index = c.ready.pop();
    QpImpl* qp = c.qps.at(index);
    if (!qp) continue;
    if (n > 1) {
      if (QpImpl* next = c.qps.at(c.ready.peek(0))) transport::prefetch_next_wqe(*next);
    }
    if (n > 2) {
      if (const QpImpl* after = c.qps.at(c.ready.peek(1))) transport::prefetch_qp(*after);
    }
    QpCounters& qc = qp_counters_of(c, *qp);
    const uint16_t before = c.tx.appended();
    transport::Env env = c.env(&qc);
    const bool more = tx_turn(env, *qp);
    qc.inc(Counter::sent_pkts, uint16_t(c.tx.appended() - before));  // frames this QP built
    if (more) c.ready.mark(index);
  }

  const uint16_t staged = c.tx.size();
  const uint16_t sent = c.tx.flush(c.io);
  const uint16_t early = c.tx.take_rung_early();  // the stage's early doorbells this poll
  c.counters.inc(Counter::sent_pkts, sent + early);
  if (sent < staged) c.counters.inc(Counter::tx_ring_full);
  return n_rx + sent + early;
}

}  // namespace uroce
