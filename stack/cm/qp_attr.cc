// The QP attributes the CM derives from a connection (include/uroce/cm.h
// cm_init_qp_attr; Linux's ib_cm_init_qp_attr and librdmacm's
// rdma_init_qp_attr): INIT as librdmacm's ucma_init_conn_qp / ucma_init_ud_qp
// set it, RTR and RTS from the fields of the REQ and REP the ids exchanged
// (PSNs as Linux ib_cm sets them: protocol.cc). The ids' own QPs move
// through the same table (protocol.cc qp_connect).
#include <algorithm>

#include "stack/cm/agent.h"
#include "stack/device/context.h"

namespace uroce::cm {
namespace {

constexpr uint8_t kMinRnrTimer = 12;  // 0.64 ms, the RNR NAK timer we advertise (rdma-core's pingpong value)

// The REQ's path MTU, within what this device carries.
Mtu cm_mtu(const Context& ctx, uint8_t req_mtu) {
  const uint8_t m = std::clamp<uint8_t>(req_mtu, uint8_t(Mtu::k256), uint8_t(ctx.max_mtu));
  return Mtu(m);
}

}  // namespace

QpType conn_qp_type(const CmIdImpl& id) {
  if (id.qp) return id.qp->qp_type;
  if (id.ps == CmPortSpace::kUdp) return QpType::kUd;
  return id.req.transport_service_type == 1 ? QpType::kUc : QpType::kRc;
}

Status qp_attr_for(const Agent& a, const CmIdImpl& id, QpType type, QpState state, QpAttr& at, uint32_t& mask) {
  at = QpAttr{};
  at.qp_state = state;
  mask = kQpState;
  switch (state) {
    case QpState::kInit:  // as librdmacm's ucma_init_conn_qp / ucma_init_ud_qp
      at.pkey_index = 0;
      at.port_num = 1;
      mask |= kQpPkeyIndex | kQpPort;
      if (type == QpType::kUd) {
        at.qkey = kRdmaUdpQkey;
        mask |= kQpQkey;
      } else {
        at.qp_access_flags = type == QpType::kRc ? kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic
                                                 : kAccessRemoteWrite;
        mask |= kQpAccessFlags;
      }
      return {};
    case QpState::kRtr:
    case QpState::kRts:
      break;
    case QpState::kReset:
    case QpState::kSqd:
    case QpState::kSqe:
    case QpState::kErr:
      return Status(StatusCode::kInvalidArgument, "the CM gives attributes for INIT, RTR and RTS only");
  }
  if (type == QpType::kUd) {  // no peer: SIDR only tells the other side where this QP is
    if (state == QpState::kRts) {
      at.sq_psn = 0;
      mask |= kQpSqPsn;
    }
    return {};
  }
  switch (id.state) {
    case CmState::kRepRcvd:
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
    case CmState::kRepSent:
    case CmState::kEstablished:
      break;
    case CmState::kIdle:
    case CmState::kAddrQuery:
    case CmState::kAddrResolved:
    case CmState::kRouteResolved:
    case CmState::kListen:
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
    case CmState::kDreqSent:
    case CmState::kTimeWait:
    case CmState::kSidrReqSent:
    case CmState::kSidrReqRcvd:
    case CmState::kError:
      return Status(StatusCode::kInvalidArgument, "the peer is not known yet (no REQ or REP received)");
  }
  const bool rc = type == QpType::kRc;
  if (state == QpState::kRtr) {
    at.path_mtu = cm_mtu(a.ctx, id.req.path_mtu);
    at.dest_qp_num = id.remote_qpn;
    at.rq_psn = id.rq_psn;
    at.ah_attr = id.route;
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (rc) {
      at.max_dest_rd_atomic = id.responder_resources;
      at.min_rnr_timer = kMinRnrTimer;
      mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
    }
    return {};
  }
  at.sq_psn = id.sq_psn;
  mask |= kQpSqPsn;
  if (rc) {
    at.timeout = id.req.primary.local_ack_timeout;
    at.retry_cnt = id.req.retry_count;
    at.rnr_retry = id.rnr_retry;
    at.max_rd_atomic = id.initiator_depth;
    mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  }
  return {};
}

}  // namespace uroce::cm
