// QP1, the General Services Interface (IBA 13.5), as far as the connection
// manager needs it: receive checks and MAD framing on UD, the outbox that turns
// queued MADs into frames of the engine's transmit burst, and the agent's
// bookkeeping (ids by comm ID, listeners by service ID, events, timers).
//
// On RoCE a MAD is the whole payload of a UD SEND Only to DestQP 1 with BTH
// P_Key 0xffff and DETH Q_Key 0x80010000 from SrcQP 1 (IBA 13.5.1, 13.5.3;
// tests/data/rxe-rping-rdmacm.pcap shows rxe framing them so, with the BTH PSN
// counting the MADs QP1 sent).
#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <cstring>

#include "stack/cm/agent.h"
#include "stack/cm/describe.h"
#include "stack/cm/ip_cm.h"
#include "stack/common/rng.h"
#include "stack/device/context.h"
#include "stack/transport/frame.h"
#include "stack/wire/psn.h"

namespace uroce::cm {

Agent::Agent(Context& c) : ctx(c) {
  ids.init(kCmMaxIds);
  timers.init(kCmMaxIds, c.now_ns);
  // Local comm IDs and TIDs start from a value that differs per run, so that
  // a restarted endpoint's new connection is not taken for a duplicate of its
  // old one (IBA 12.9.8.3: comm IDs must not repeat while the old may linger).
  const uint64_t seed = c.cfg.key_seed ? c.cfg.key_seed * kSplitmix64Gamma : rte_rdtsc();
  comm_salt = uint32_t(seed >> 17);
  next_tid = (seed >> 5) & 0xffffffffull;
  // EUI-64 from the MAC (as rxe derives its node GUID from the netdev's MAC).
  const MacAddr& m = c.mac;
  ca_guid = uint64_t(m.b[0] ^ 2) << 56 | uint64_t(m.b[1]) << 48 | uint64_t(m.b[2]) << 40 | 0xfffeull << 24 |
            uint64_t(m.b[3]) << 16 | uint64_t(m.b[4]) << 8 | m.b[5];
}

Agent& agent(Context& ctx) {
  if (!ctx.qp1) ctx.qp1 = std::make_unique<Agent>(ctx);
  return *find_agent(ctx);
}

uint64_t Agent::now_ns() const { return ctx.now_ns; }

uint32_t Agent::new_comm_id(const CmIdImpl& id) const {
  return (comm_salt + ids.generation(id.index)) << kCmIdIndexBits | id.index;
}

CmIdImpl* Agent::by_comm_id(uint32_t local_comm_id) const {
  CmIdImpl* id = ids.at(local_comm_id & (kCmMaxIds - 1));
  return id && id->local_comm_id == local_comm_id && id->state != CmState::kListen ? id : nullptr;
}

CmIdImpl* Agent::listener_for(uint64_t service_id) const {
  for (uint32_t i = 0; i < ids.capacity(); ++i) {
    CmIdImpl* id = ids.at(i);
    if (id && id->state == CmState::kListen && rdma_cm_service_id(PortSpace(id->ps), id->src.port) == service_id) {
      return id;
    }
  }
  return nullptr;
}

void Agent::push_event(CmIdImpl& id, CmEventType e, int status) {
  CmEvent ev;
  ev.event = e;
  ev.id = &id;
  ev.status = status;
  events.push_back(ev);
}

void Agent::send(const AhAttr& av, std::span<const uint8_t> mad) {
  constexpr size_t kMaxOutbox = 256;  // MADs waiting for room in the transmit burst
  if (outbox.size() >= kMaxOutbox || mad.size() != kMadBytes) return counters.inc(CmCounter::mad_drop_tx_full);
  OutMad& o = outbox.emplace_back();
  o.av = av;
  std::memcpy(o.mad.data(), mad.data(), kMadBytes);
}

void Agent::send_to(CmIdImpl& id, const CmMad& m, bool keep) {
  std::array<uint8_t, kMadBytes> buf{};
  if (encode(m, buf) != CmError::kOk) return counters.inc(CmCounter::mad_drop_malformed);  // a bug: counted, not sent
  if (keep) {
    id.last_mad = buf;
    id.has_last = true;
  }
  send(id.route, buf);
}

namespace {

// Frames queued MADs into the engine's transmit burst; what does not fit
// waits for the next poll.
void flush(Agent& a) {
  Context& ctx = a.ctx;
  transport::Env env = ctx.env();
  while (!a.outbox.empty() && !ctx.tx.full()) {
    const Agent::OutMad& o = a.outbox.front();
    auto src = transport::path_source(*ctx.net, o.av);
    if (!src.ok()) {  // the GID went away since the id resolved its route
      a.counters.inc(CmCounter::mad_drop_tx_full);
      a.outbox.pop_front();
      continue;
    }
    wire::PacketDesc d;
    transport::fill_path(*ctx.net, o.av, *src, kGsiQpn, transport::roce_udp_sport(kGsiQpn, kGsiQpn), d);
    set_gsi_framing(d);
    d.ack_req = true;  // as rxe's QP1 sends them
    d.psn = a.gsi_psn;
    rte_mbuf* m = nullptr;
    uint8_t* p = transport::begin_frame(env, d, &m);
    if (!p) return;  // pool empty: counted there, retried at the next poll
    std::memcpy(p, o.mad.data(), kMadBytes);
    transport::end_frame(env, d, m);
    a.gsi_psn = wire::psn_add(a.gsi_psn, 1);
    a.counters.inc(CmCounter::mad_sent);
    a.outbox.pop_front();
  }
}

}  // namespace

void Agent::rx(const wire::PacketDesc& d, const uint8_t* frame) {
  Agent& a = *this;
  a.counters.inc(CmCounter::mad_rcvd);
  // IBA 13.5.1 / 13.5.3: QP1 takes UD SENDs whose P_Key matches ours (any
  // membership) and whose Q_Key is the well-known GSI Q_Key; a MAD is 256 bytes.
  if (!is_gsi_packet(d) || (d.pkey & 0x7fff) != (kDefaultPkeyFull & 0x7fff) || d.deth_qkey != kGsiQkey ||
      d.payload_len != kMadBytes) {
    return a.counters.inc(CmCounter::mad_drop_framing);
  }
  const std::span<const uint8_t> mad(frame + d.payload_off, kMadBytes);
  CmMad m;
  const CmError e = decode(mad, m);
  if (e == CmError::kUnknownAttr || e == CmError::kNotCm || e == CmError::kBadMethod) {
    return a.counters.inc(CmCounter::mad_drop_unsupported);
  }
  if (e != CmError::kOk) return a.counters.inc(CmCounter::mad_drop_malformed);
  // Replies go back where the MAD came from: the sender's GID and MAC, from
  // the GID of ours it was sent to (the engine checked that we own it).
  AhAttr from;
  from.dgid = d.sgid;
  from.dmac = d.src_mac;
  const uint16_t vlan = d.has_vlan ? uint16_t(d.vlan_tci & 0x0fff) : net::kNoVlan;
  const auto gid_type = d.l3 == wire::L3Kind::kGrh ? net::GidType::kRoceV1 : net::GidType::kRoceV2;
  from.sgid_index = ctx.net->gids().find(d.dgid, vlan, gid_type).value_or(0);
  on_mad(a, m, from, d.deth_src_qp);
  flush(a);
}

void Agent::poll(uint64_t now) {
  Agent& a = *this;
  a.timers.advance(now, [&a](uint32_t index) {
    if (CmIdImpl* id = a.ids.at(index)) on_timer(a, *id);
  });
  if (!a.held_reqs.empty()) expire_held_reqs(a, now);
  flush(a);
}

void Agent::qp_destroyed(const Qp* qp) {
  for (uint32_t i = 0; i < ids.capacity(); ++i) {
    if (CmIdImpl* id = ids.at(i); id && id->qp == qp) id->qp = nullptr;
  }
}

}  // namespace uroce::cm
