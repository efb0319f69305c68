// modify_qp: the QP state machine of IBA 10.3.1 with the required and optional
// attributes of each transition from IBA 11.2.5.2 Table 91, and the range of
// every attribute. Table 91 is data below, not code.
#include <array>

#include "stack/device/context.h"
#include "stack/transport/frame.h"
#include "stack/transport/qp.h"
#include "stack/wire/psn.h"

namespace uroce {

namespace {

using transport::QpImpl;

enum TypeBit : uint8_t { kTypeRc = 1, kTypeUc = 2, kTypeUd = 4, kTypeAll = 7 };

uint8_t type_bit(QpType t) {
  switch (t) {
    case QpType::kRc: return kTypeRc;
    case QpType::kUc: return kTypeUc;
    case QpType::kUd: return kTypeUd;
  }
  return 0;
}
size_t type_index(QpType t) { return t == QpType::kRc ? 0 : t == QpType::kUc ? 1 : 2; }

struct Transition {
  QpState from, to;
  uint8_t types;                      // TypeBit mask of the QP types it exists for
  std::array<uint32_t, 3> required;   // by QP type: RC, UC, UD
  std::array<uint32_t, 3> optional;
};

constexpr uint32_t kPort = kQpPkeyIndex | kQpPort;
constexpr uint32_t kRcRtr = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
constexpr uint32_t kUcRtr = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
constexpr uint32_t kRcRts = kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
constexpr uint32_t kRcRtsOpt = kQpCurState | kQpAccessFlags | kQpMinRnrTimer;
constexpr uint32_t kUcRtsOpt = kQpCurState | kQpAccessFlags;
constexpr uint32_t kUdRtsOpt = kQpCurState | kQpQkey;
constexpr uint32_t kRcSqd = kQpCurState | kQpAv | kQpPkeyIndex | kQpAccessFlags | kQpPathMtu | kQpTimeout |
                            kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic | kQpMaxDestRdAtomic | kQpMinRnrTimer;
constexpr uint32_t kUcSqd = kQpCurState | kQpAv | kQpPkeyIndex | kQpAccessFlags | kQpPathMtu;
constexpr uint32_t kUdSqd = kQpCurState | kQpPkeyIndex | kQpQkey;

// IBA 11.2.5.2 Table 91 (alternate paths and path migration are not supported).
// Any state -> RESET and any state -> ERR take no attributes and are handled apart.
constexpr std::array<Transition, 9> kTable91 = {{
    {QpState::kReset, QpState::kInit, kTypeAll,
     {kPort | kQpAccessFlags, kPort | kQpAccessFlags, kPort | kQpQkey}, {0, 0, 0}},
    {QpState::kInit, QpState::kInit, kTypeAll,
     {0, 0, 0}, {kPort | kQpAccessFlags, kPort | kQpAccessFlags, kPort | kQpQkey}},
    {QpState::kInit, QpState::kRtr, kTypeAll,
     {kRcRtr, kUcRtr, 0},
     {kQpPkeyIndex | kQpAccessFlags | kQpExt, kQpPkeyIndex | kQpAccessFlags, kQpPkeyIndex | kQpQkey}},
    {QpState::kRtr, QpState::kRts, kTypeAll, {kRcRts, kQpSqPsn, kQpSqPsn}, {kRcRtsOpt, kUcRtsOpt, kUdRtsOpt}},
    {QpState::kRts, QpState::kRts, kTypeAll, {0, 0, 0}, {kRcRtsOpt, kUcRtsOpt, kUdRtsOpt}},
    {QpState::kRts, QpState::kSqd, kTypeAll, {0, 0, 0}, {0, 0, 0}},
    {QpState::kSqd, QpState::kRts, kTypeAll, {0, 0, 0}, {kRcRtsOpt, kUcRtsOpt, kUdRtsOpt}},
    {QpState::kSqd, QpState::kSqd, kTypeAll, {0, 0, 0}, {kRcSqd, kUcSqd, kUdSqd}},
    {QpState::kSqe, QpState::kRts, kTypeUc | kTypeUd, {0, 0, 0}, {0, kUcRtsOpt, kUdRtsOpt}},
}};

const Transition* find_transition(QpState from, QpState to, QpType type) {
  for (const Transition& t : kTable91) {
    if (t.from == from && t.to == to && (t.types & type_bit(type))) return &t;
  }
  return nullptr;
}

// IBA 10.3.1.1: RESET discards all WQEs and returns the QP to its state
// after create_qp.
void qp_reset(Context& ctx, QpImpl& qp) {
  ctx.timers.cancel(qp.index);
  ctx.pace_timers.cancel(qp.index);
  qp.cc.init(ctx.cfg.cc, qp.qp_type);
  qp.sq.clear();
  qp.rq.ring.clear();
  qp.req = transport::RequesterState{};
  qp.comp = transport::CompleterState{};
  qp.resp = transport::ResponderState{};
  qp.ext.reset();
}


Status check_ext(const QpImpl& qp, const QpExt& e) {
  auto bad = [](const char* m) { return Status(StatusCode::kInvalidArgument, m); };
  if (e.paths < 1 || e.paths > transport::kMaxPaths) return bad("ext.paths not in 1..256");
  if (e.path_mode != PathMode::kPacket && e.path_mode != PathMode::kFlowlet) return bad("ext.path_mode unknown");
  // Placement ahead of order takes receive WQEs by their sequence number,
  // which a receive queue shared with other QPs cannot give.
  if (e.selective_repeat && qp.srq) {
    return bad("ext.selective_repeat needs a receive queue of the QP's own, not an SRQ");
  }
  return {};
}

Status check_ranges(const Context& ctx, const QpAttr& a, uint32_t mask) {
  auto bad = [](const char* m) { return Status(StatusCode::kInvalidArgument, m); };
  constexpr uint32_t kAllAccess = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  if ((mask & kQpPkeyIndex) && a.pkey_index != 0) return bad("pkey_index: the P_Key table has one entry");
  if ((mask & kQpPort) && a.port_num != 1) return bad("port_num must be 1");
  if ((mask & kQpAccessFlags) && (a.qp_access_flags & ~kAllAccess)) return bad("unknown qp_access_flags");
  if ((mask & kQpPathMtu) &&
      (uint8_t(a.path_mtu) < uint8_t(Mtu::k256) || uint8_t(a.path_mtu) > uint8_t(ctx.max_mtu))) {
    return bad("path_mtu not in 256..4096 or larger than the port carries");
  }
  if ((mask & kQpTimeout) && a.timeout > 31) return bad("timeout > 31");
  if ((mask & kQpRetryCnt) && a.retry_cnt > 7) return bad("retry_cnt > 7");
  if ((mask & kQpRnrRetry) && a.rnr_retry > 7) return bad("rnr_retry > 7");
  if ((mask & kQpMinRnrTimer) && a.min_rnr_timer > 31) return bad("min_rnr_timer > 31");
  if ((mask & kQpRqPsn) && a.rq_psn > wire::kPsnMask) return bad("rq_psn is 24 bits");
  if ((mask & kQpSqPsn) && a.sq_psn > wire::kPsnMask) return bad("sq_psn is 24 bits");
  if ((mask & kQpDestQpn) && a.dest_qp_num > wire::kBthQpnMask) return bad("dest_qp_num is 24 bits");
  if ((mask & kQpMaxQpRdAtomic) && a.max_rd_atomic > transport::kMaxRdAtomic) return bad("max_rd_atomic > 16");
  if ((mask & kQpMaxDestRdAtomic) && a.max_dest_rd_atomic > transport::kMaxRdAtomic) {
    return bad("max_dest_rd_atomic > 16");
  }
  if ((mask & kQpAv) && (a.ah_attr.port_num != 1 || a.ah_attr.flow_label > wire::kFlowLabelMask)) {
    return bad("ah_attr: port_num or flow_label out of range");
  }
  return {};
}

void apply(QpImpl& qp, const QpAttr& a, uint32_t mask) {
  QpAttr& q = qp.attr;
  if (mask & kQpPkeyIndex) q.pkey_index = a.pkey_index;
  if (mask & kQpPort) q.port_num = a.port_num;
  if (mask & kQpAccessFlags) q.qp_access_flags = a.qp_access_flags;
  if (mask & kQpQkey) q.qkey = a.qkey;
  if (mask & kQpAv) q.ah_attr = a.ah_attr;
  if (mask & kQpPathMtu) q.path_mtu = a.path_mtu;
  if (mask & kQpTimeout) q.timeout = a.timeout;
  if (mask & kQpRetryCnt) q.retry_cnt = qp.comp.retry_left = a.retry_cnt;
  if (mask & kQpRnrRetry) q.rnr_retry = qp.comp.rnr_left = a.rnr_retry;
  if (mask & kQpRqPsn) q.rq_psn = a.rq_psn;
  if (mask & kQpSqPsn) q.sq_psn = a.sq_psn;
  if (mask & kQpMaxQpRdAtomic) q.max_rd_atomic = a.max_rd_atomic;
  if (mask & kQpMinRnrTimer) q.min_rnr_timer = a.min_rnr_timer;
  if (mask & kQpMaxDestRdAtomic) {  // the responder resources are resized: start them afresh
    q.max_dest_rd_atomic = a.max_dest_rd_atomic;
    qp.resp.res = {};
    qp.resp.res_head = 0;
  }
  if (mask & kQpDestQpn) q.dest_qp_num = a.dest_qp_num;
  if (mask & kQpExt) q.ext = a.ext;
}

}  // namespace

const char* qp_state_str(QpState s) {
  switch (s) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kSqd: return "SQD";
    case QpState::kSqe: return "SQE";
    case QpState::kErr: return "ERR";
  }
  return "?";
}

Status modify_qp(Qp* q, const QpAttr& a, uint32_t mask) {
  if (!q) return Status(StatusCode::kInvalidArgument, "null qp");
  QpImpl& qp = transport::impl(q);
  Context& ctx = *qp.context;
  const QpState from = qp.state;
  const QpState to = (mask & kQpState) ? a.qp_state : from;
  if ((mask & kQpCurState) && a.cur_qp_state != from) {
    return Status(StatusCode::kInvalidQpState, "cur_qp_state is not the current state");
  }
  const uint32_t attrs = mask & ~(kQpState | kQpCurState);
  if (to == QpState::kReset || to == QpState::kErr) {
    if (attrs) return Status(StatusCode::kInvalidArgument, "attributes not allowed for this transition");
    if (to == QpState::kReset) {
      qp_reset(ctx, qp);
      qp.state = qp.attr.qp_state = QpState::kReset;
    } else {
      {
        transport::Env env = ctx.env();
        transport::qp_to_error(env, qp);
      }
    }
    return {};
  }
  const Transition* t = find_transition(from, to, qp.qp_type);
  if (!t) return Status(StatusCode::kInvalidQpState, "transition not allowed (IBA 10.3.1)");
  const size_t ti = type_index(qp.qp_type);
  if ((attrs & t->required[ti]) != t->required[ti]) {
    return Status(StatusCode::kInvalidArgument, "a required attribute is missing (Table 91)");
  }
  if (attrs & ~(t->required[ti] | t->optional[ti] | kQpCurState)) {
    return Status(StatusCode::kInvalidArgument, "attribute not allowed for this transition (Table 91)");
  }
  if (Status s = check_ranges(ctx, a, attrs); !s.ok()) return s;
  if (attrs & kQpExt) {
    if (Status s = check_ext(qp, a.ext); !s.ok()) return s;
  }
  if (attrs & kQpAv) {  // the primary path's source: GID table entry ah_attr.sgid_index, pinned here
    auto src = transport::path_source(*ctx.net, a.ah_attr);
    if (!src.ok()) return src.status();
    qp.sgid = *src;
  }
  apply(qp, a, attrs);
  qp.path_template.len = 0;  // remade from the new attributes at the next packet
  if (from == QpState::kInit && to == QpState::kRtr) {
    qp.resp.epsn = qp.attr.rq_psn;
    qp.udp_sport = transport::roce_udp_sport(qp.qp_num, qp.attr.dest_qp_num);
    transport::ext_attach(qp);  // after udp_sport: the paths are made from it
  }
  if (from == QpState::kRtr && to == QpState::kRts) {
    qp.req.sq_psn = qp.req.req_psn = qp.req.psn_hwm = qp.comp.comp_psn = qp.attr.sq_psn;
    qp.req.req_idx = qp.sq.tail();
  }
  qp.state = qp.attr.qp_state = to;
  if (to == QpState::kRts) ctx.ready.mark(qp.index);
  return {};
}

}  // namespace uroce
