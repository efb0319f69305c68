// The CM state machine end to end (stack/cm/protocol.cc, rdma_cm.cc, gsi.cc):
// two engines back to back on TestPort, a virtual clock, the rdma_cm-style
// API of include/uroce/cm.h. Every handshake is checked on the wire (the
// frames QP1 sent, decoded by stack/cm/mad.cc) and through the QPs it set up
// (data flows, PSNs as the REQ/REP carried them). Loss and duplication come
// from the port hook: IBA 12.9.2 retries, 12.9.8 duplicates and stale REQs,
// MRA (12.6.6), and malformed MADs that must be dropped and counted.
#include <uroce/cm.h>

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "stack/cm/agent.h"
#include "stack/cm/describe.h"
#include "stack/cm/mad.h"
#include "stack/device/context.h"
#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

using cm::CmAttr;

constexpr uint16_t kPort = 7174;  // rping's
constexpr uint64_t kStepNs = 20'000;

// The CM attribute of a frame QP1 sent, or 0.
uint16_t cm_attr(const wire::PacketDesc& d, const std::vector<uint8_t>& bytes) {
  if (!cm::is_gsi_packet(d) || bytes.size() < size_t(d.payload_off) + cm::kMadBytes) return 0;
  cm::MadHdrDesc h;
  if (cm::decode_mad_hdr({bytes.data() + d.payload_off, cm::kMadBytes}, h) != cm::CmError::kOk) return 0;
  return h.attr_id;
}

// Two devices back to back (the transport tests' Pair) without QPs: the CM makes them.
class Cm : public Pair {
 protected:
  void SetUp() override {
    PairOptions o;
    o.cqe = 64;
    open_sides(o);
    a->port.keep_bytes = b->port.keep_bytes = true;
  }
  void TearDown() override {
    for (Side* s : {a.get(), b.get()}) {
      CmEvent ev;
      while (cm_get_event(s->ctx.get(), &ev)) {
      }
    }
  }

  void step() {
    now += kStepNs;
    poll(a->ctx.get(), now);
    poll(b->ctx.get(), now);
  }
  /// Polls until side s has an event (returned), or max_ns passes (kDeviceRemoval as "none").
  CmEvent wait_event(Side& s, uint64_t max_ns = 10'000'000'000ull) {
    CmEvent ev;
    for (uint64_t t = 0; t < max_ns; t += kStepNs) {
      if (cm_get_event(s.ctx.get(), &ev)) return ev;
      step();
    }
    ev.event = CmEventType::kDeviceRemoval;
    return ev;
  }
  void run_for(uint64_t ns) {
    for (uint64_t t = 0; t < ns; t += kStepNs) step();
  }

  QpInitAttr qp_attr(Side& s, QpType t = QpType::kRc) {
    QpInitAttr ia;
    ia.send_cq = s.scq;
    ia.recv_cq = s.rcq;
    ia.qp_type = t;
    ia.sq_sig_all = true;
    ia.cap.max_send_wr = 16;
    ia.cap.max_recv_wr = 16;
    return ia;
  }

  /// b listens on kPort; a resolves b's address and route and creates its QP.
  void listen_and_resolve(CmPortSpace ps = CmPortSpace::kTcp) {
    listener = must(cm_create_id(b->ctx.get(), nullptr, ps));
    ASSERT_TRUE(cm_bind_addr(listener, SockAddr{Gid{}, kPort}).ok());
    ASSERT_TRUE(cm_listen(listener, 4).ok());
    resolve_client(ps);
  }
  /// A new client id on a: resolves b's address and route (to port) and creates its QP.
  void resolve_client(CmPortSpace ps = CmPortSpace::kTcp, uint16_t port = kPort) {
    client = must(cm_create_id(a->ctx.get(), nullptr, ps));
    ASSERT_TRUE(cm_resolve_addr(client, nullptr, SockAddr{b->gid, port}, 2000).ok());
    ASSERT_EQ(wait_event(*a).event, CmEventType::kAddrResolved);
    EXPECT_EQ(client->route.dmac, b->mac);
    ASSERT_TRUE(cm_resolve_route(client, 2000).ok());
    ASSERT_EQ(wait_event(*a).event, CmEventType::kRouteResolved);
    const QpType t = ps == CmPortSpace::kUdp ? QpType::kUd : QpType::kRc;
    ASSERT_TRUE(cm_create_qp(client, a->pd, qp_attr(*a, t)).ok());
  }

  /// a connects with private data "hello"; b's request is returned (not yet accepted).
  CmId* connect_request() {
    CmConnParam p;
    p.private_data = "hello";
    p.private_data_len = 6;
    EXPECT_TRUE(cm_connect(client, p).ok());
    const CmEvent ev = wait_event(*b);
    EXPECT_EQ(ev.event, CmEventType::kConnectRequest);
    EXPECT_EQ(ev.listen_id, listener);
    EXPECT_STREQ(reinterpret_cast<const char*>(ev.private_data), "hello");
    if (ev.id) {
      EXPECT_EQ(ev.id->dst.ip, a->gid);
      EXPECT_EQ(ev.id->dst.port, client->src.port);
      EXPECT_EQ(ev.id->src.port, kPort);
    }
    return ev.id;
  }

  void accept(CmId* server) {
    ASSERT_TRUE(cm_create_qp(server, b->pd, qp_attr(*b)).ok());
    CmConnParam p;
    ASSERT_TRUE(cm_accept(server, p).ok());
  }

  /// connect_request, b accepts it, and both sides report Established;
  /// server is b's id of the connection.
  void establish(CmId*& server) {
    server = connect_request();
    ASSERT_NE(server, nullptr);
    ASSERT_NO_FATAL_FAILURE(accept(server));
    ASSERT_EQ(wait_event(*a).event, CmEventType::kEstablished);
    ASSERT_EQ(wait_event(*b).event, CmEventType::kEstablished);
  }

  /// Count of frames side s sent with CM attribute attr.
  size_t sent(Side& s, CmAttr attr) const {
    size_t n = 0;
    for (size_t i = 0; i < s.port.sent.size(); ++i) n += cm_attr(s.port.sent[i], s.port.sent_bytes[i]) == uint16_t(attr);
    return n;
  }
  /// Index in s.port.sent of the last frame side s sent with CM attribute attr.
  size_t last_sent(Side& s, CmAttr attr) const {
    size_t last = 0;
    for (size_t i = 0; i < s.port.sent.size(); ++i) {
      if (cm_attr(s.port.sent[i], s.port.sent_bytes[i]) == uint16_t(attr)) last = i;
    }
    return last;
  }
  uint64_t cnt(Side& s, CmCounter c) const { return query_cm_counters(s.ctx.get()).get(c); }

  /// Drops the first n frames side s sends with CM attribute attr.
  void drop_first(Side& s, CmAttr attr, int n) {
    auto left = std::make_shared<int>(n);
    Side* sp = &s;
    s.port.hook = [sp, attr, left](const wire::PacketDesc& d) {
      // keep_bytes has recorded the frame before the hook decides: decode its attribute.
      if (*left <= 0 || cm_attr(d, sp->port.sent_bytes.back()) != uint16_t(attr)) return TestPort::Action::kPass;
      --*left;
      return TestPort::Action::kDrop;
    };
  }

  /// One SEND a -> b over the connected QPs; checks it lands.
  void send_one(Qp* qa, Qp* qb) {
    std::memcpy(a->buf.data(), "ping", 5);
    ASSERT_TRUE(post_recv_on(*b, qb).ok());
    Sge g = a->sge(0, 5);
    SendWr wr = send_wr(0, &g).signaled();
    ASSERT_TRUE(post_send(qa, &wr, nullptr).ok());
    Wc wc{};
    for (int i = 0; i < 100000 && poll_cq(b->rcq, 1, &wc) == 0; ++i) step();
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_EQ(wc.byte_len, 5u);
    EXPECT_STREQ(reinterpret_cast<const char*>(b->buf.data() + 4096), "ping");
  }
  Status post_recv_on(Side& s, Qp* q) {
    Sge g = s.sge(4096, 64);
    RecvWr wr;
    wr.sg_list = &g;
    wr.num_sge = 1;
    return post_recv(q, &wr, nullptr);
  }

  CmId* listener = nullptr;
  CmId* client = nullptr;
};

// REQ -> REP -> RTU, data both ways' PSNs as exchanged, DREQ -> DREP, no leaks.
TEST_F(Cm, ConnectAcceptTransferDisconnect) {
  listen_and_resolve();
  CmId* server = nullptr;
  ASSERT_NO_FATAL_FAILURE(establish(server));
  EXPECT_EQ(client->qp->state, QpState::kRts);
  EXPECT_EQ(server->qp->state, QpState::kRts);
  EXPECT_EQ(sent(*a, CmAttr::kReq), 1u);
  EXPECT_EQ(sent(*b, CmAttr::kRep), 1u);
  EXPECT_EQ(sent(*a, CmAttr::kRtu), 1u);
  // The PSN a REQ / REP carries is what its sender's receive queue expects
  // (Linux ib_cm, as rxe peers run it): each side's sq_psn is the other's.
  QpAttr qa, qb;
  QpInitAttr ia;
  ASSERT_TRUE(query_qp(client->qp, &qa, &ia).ok());
  ASSERT_TRUE(query_qp(server->qp, &qb, &ia).ok());
  EXPECT_EQ(qa.sq_psn, qb.rq_psn);
  EXPECT_EQ(qb.sq_psn, qa.rq_psn);
  EXPECT_EQ(qa.dest_qp_num, server->qp->qp_num);
  EXPECT_EQ(qb.dest_qp_num, client->qp->qp_num);
  send_one(client->qp, server->qp);

  ASSERT_TRUE(cm_disconnect(client).ok());
  EXPECT_EQ(wait_event(*b).event, CmEventType::kDisconnected);
  EXPECT_EQ(wait_event(*a).event, CmEventType::kDisconnected);
  EXPECT_EQ(client->qp->state, QpState::kErr);
  EXPECT_EQ(server->qp->state, QpState::kErr);
  EXPECT_EQ(sent(*a, CmAttr::kDreq), 1u);
  EXPECT_EQ(sent(*b, CmAttr::kDrep), 1u);
  // Every MAD decodes and describes (the dump's view of them).
  for (Side* s : {a.get(), b.get()}) {
    for (size_t i = 0; i < s->port.sent.size(); ++i) {
      const auto& d = s->port.sent[i];
      if (!cm::is_gsi_packet(d)) continue;
      EXPECT_EQ(d.deth_qkey, cm::kGsiQkey);
      EXPECT_EQ(d.deth_src_qp, cm::kGsiQpn);
      EXPECT_EQ(d.pkey, 0xffff);
      cm::CmMad m;
      EXPECT_EQ(cm::decode({s->port.sent_bytes[i].data() + d.payload_off, cm::kMadBytes}, m), cm::CmError::kOk);
    }
  }
  ASSERT_TRUE(cm_destroy_id(client).ok());
  ASSERT_TRUE(cm_destroy_id(server).ok());
  ASSERT_TRUE(cm_destroy_id(listener).ok());
  EXPECT_EQ(cm_id_count(a->ctx.get()), 0u);
  EXPECT_EQ(cm_id_count(b->ctx.get()), 0u);
  EXPECT_EQ(cnt(*a, CmCounter::established), 1u);
  EXPECT_EQ(cnt(*b, CmCounter::disconnected), 1u);
}

// rdma_init_qp_attr / rdma_establish (rping -q): neither id has a QP; each
// side moves its own with cm_init_qp_attr's attributes, the REQ and REP
// name them by qp_num, and the active side sends the RTU with cm_establish
// once kConnectResponse came (IBA 12.9.6, REP Rcvd), with no event after it.
TEST_F(Cm, ConsumerMovesItsOwnQpWithInitQpAttr) {
  listener = must(cm_create_id(b->ctx.get(), nullptr, CmPortSpace::kTcp));
  ASSERT_TRUE(cm_bind_addr(listener, SockAddr{Gid{}, kPort}).ok());
  ASSERT_TRUE(cm_listen(listener, 4).ok());
  client = must(cm_create_id(a->ctx.get(), nullptr, CmPortSpace::kTcp));
  ASSERT_TRUE(cm_resolve_addr(client, nullptr, SockAddr{b->gid, kPort}, 2000).ok());
  ASSERT_EQ(wait_event(*a).event, CmEventType::kAddrResolved);
  ASSERT_TRUE(cm_resolve_route(client, 2000).ok());
  ASSERT_EQ(wait_event(*a).event, CmEventType::kRouteResolved);
  auto move = [](CmId* id, Qp* qp, QpState to) {
    QpAttr at;
    at.qp_state = to;
    uint32_t mask = 0;
    Status st = cm_init_qp_attr(id, at, mask);
    return st.ok() ? modify_qp(qp, at, mask) : st;
  };
  Qp* qa = must(create_qp(a->pd, qp_attr(*a)));
  Qp* qb = must(create_qp(b->pd, qp_attr(*b)));
  ASSERT_TRUE(move(client, qa, QpState::kInit).ok());
  EXPECT_EQ(move(client, qa, QpState::kRtr).code(), StatusCode::kInvalidArgument);  // no REP yet: no peer
  EXPECT_FALSE(cm_connect(client, CmConnParam{}).ok());  // no QP on the id and none named
  CmConnParam pa;
  pa.qp_num = qa->qp_num;
  ASSERT_TRUE(cm_connect(client, pa).ok());
  const CmEvent req = wait_event(*b);
  ASSERT_EQ(req.event, CmEventType::kConnectRequest);
  CmId* server = req.id;
  for (const QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts}) ASSERT_TRUE(move(server, qb, s).ok());
  CmConnParam pb;
  pb.qp_num = qb->qp_num;
  ASSERT_TRUE(cm_accept(server, pb).ok());
  ASSERT_EQ(wait_event(*a).event, CmEventType::kConnectResponse);
  EXPECT_EQ(sent(*a, CmAttr::kRtu), 0u);  // the consumer's move comes first
  for (const QpState s : {QpState::kRtr, QpState::kRts}) ASSERT_TRUE(move(client, qa, s).ok());
  ASSERT_TRUE(cm_establish(client).ok());
  EXPECT_FALSE(cm_establish(client).ok());  // once
  ASSERT_EQ(wait_event(*b).event, CmEventType::kEstablished);
  EXPECT_EQ(sent(*a, CmAttr::kRtu), 1u);
  QpAttr at_a, at_b;
  QpInitAttr ia;
  ASSERT_TRUE(query_qp(qa, &at_a, &ia).ok());
  ASSERT_TRUE(query_qp(qb, &at_b, &ia).ok());
  EXPECT_EQ(at_a.sq_psn, at_b.rq_psn);
  EXPECT_EQ(at_b.sq_psn, at_a.rq_psn);
  EXPECT_EQ(at_a.dest_qp_num, qb->qp_num);
  EXPECT_EQ(at_b.dest_qp_num, qa->qp_num);
  send_one(qa, qb);
  // No event followed cm_establish on a: the next is the disconnect.
  ASSERT_TRUE(cm_disconnect(client).ok());
  EXPECT_EQ(wait_event(*b).event, CmEventType::kDisconnected);
  EXPECT_EQ(wait_event(*a).event, CmEventType::kDisconnected);
  EXPECT_EQ(qa->state, QpState::kRts);  // the ids never held the QPs: the consumer moves them to ERR
  ASSERT_TRUE(cm_destroy_id(client).ok());
  ASSERT_TRUE(cm_destroy_id(server).ok());
  ASSERT_TRUE(cm_destroy_id(listener).ok());
  ASSERT_TRUE(destroy_qp(qa).ok());
  ASSERT_TRUE(destroy_qp(qb).ok());
}

// A QP lent to an id (cm_attach_qp) and destroyed without cm_detach_qp, as
// rping frees the QP rdma_create_qp made with ibv_destroy_qp before
// rdma_destroy_id: the id forgets it, and the peer's DREQ that follows moves
// no QP (the ASan build reads freed memory here without the forgetting).
TEST_F(Cm, DestroyedAttachedQpIsForgotten) {
  listen_and_resolve();
  CmId* server = connect_request();
  ASSERT_NE(server, nullptr);
  Qp* qb = must(create_qp(b->pd, qp_attr(*b)));
  ASSERT_TRUE(cm_attach_qp(server, qb).ok());
  ASSERT_TRUE(cm_accept(server, CmConnParam{}).ok());
  ASSERT_EQ(wait_event(*a).event, CmEventType::kEstablished);
  ASSERT_EQ(wait_event(*b).event, CmEventType::kEstablished);
  ASSERT_TRUE(destroy_qp(qb).ok());
  EXPECT_EQ(server->qp, nullptr);
  ASSERT_TRUE(cm_disconnect(client).ok());
  EXPECT_EQ(wait_event(*b).event, CmEventType::kDisconnected);
  EXPECT_EQ(wait_event(*a).event, CmEventType::kDisconnected);
  EXPECT_EQ(client->qp->state, QpState::kErr);
  ASSERT_TRUE(cm_destroy_id(server).ok());
  ASSERT_TRUE(cm_destroy_id(client).ok());
  ASSERT_TRUE(cm_destroy_id(listener).ok());
  EXPECT_EQ(cm_id_count(b->ctx.get()), 0u);
}

// IBA 12.6.7 / Table 109: no listener for the service ID -> REJ reason 8.
TEST_F(Cm, NoListenerIsRejectedInvalidServiceId) {
  listen_and_resolve();
  ASSERT_TRUE(cm_destroy_id(listener).ok());
  ASSERT_TRUE(cm_connect(client, CmConnParam{}).ok());
  const CmEvent ev = wait_event(*a);
  EXPECT_EQ(ev.event, CmEventType::kRejected);
  EXPECT_EQ(ev.status, cm::kRejInvalidServiceId);
  EXPECT_EQ(client->qp->state, QpState::kErr);
  EXPECT_EQ(cm_id_count(b->ctx.get()), 0u);  // no id made for the REQ
}

// A REQ that comes before its listener is held for cm::kListenGraceNs, not
// rejected at once (perftest -R listens for its test connection just after
// the handshake on the first one): a listener that comes in time takes it.
TEST_F(Cm, ReqBeforeListenIsHeldForALateListener) {
  listen_and_resolve();
  ASSERT_TRUE(cm_destroy_id(listener).ok());
  CmConnParam p;
  ASSERT_TRUE(cm_connect(client, p).ok());
  run_for(cm::kListenGraceNs / 2);
  EXPECT_EQ(sent(*b, CmAttr::kRej), 0u);
  listener = must(cm_create_id(b->ctx.get(), nullptr, CmPortSpace::kTcp));
  ASSERT_TRUE(cm_bind_addr(listener, SockAddr{Gid{}, kPort}).ok());
  ASSERT_TRUE(cm_listen(listener, 4).ok());
  const CmEvent ev = wait_event(*b);
  ASSERT_EQ(ev.event, CmEventType::kConnectRequest);
  EXPECT_EQ(sent(*b, CmAttr::kRej), 0u);
}

// ... and one that no listener takes is rejected (reason 8) when the grace ends, not before.
TEST_F(Cm, HeldReqIsRejectedWhenTheGraceEnds) {
  listen_and_resolve();
  ASSERT_TRUE(cm_destroy_id(listener).ok());
  ASSERT_TRUE(cm_connect(client, CmConnParam{}).ok());
  const uint64_t start = now;
  const CmEvent ev = wait_event(*a);
  EXPECT_EQ(ev.event, CmEventType::kRejected);
  EXPECT_EQ(ev.status, cm::kRejInvalidServiceId);
  EXPECT_GE(now - start, cm::kListenGraceNs);
  EXPECT_LT(now - start, cm::kListenGraceNs + 10'000'000);
  EXPECT_EQ(sent(*b, CmAttr::kRej), 1u);
  EXPECT_TRUE(cm::find_agent(*b->ctx)->held_reqs.empty());
}

// A listener on another port takes nothing, and the REQ keeps its deadline.
TEST_F(Cm, ListenerOnAnotherPortLeavesTheHeldReqsDeadline) {
  listen_and_resolve();
  ASSERT_TRUE(cm_destroy_id(listener).ok());
  ASSERT_TRUE(cm_connect(client, CmConnParam{}).ok());
  const uint64_t start = now;
  run_for(cm::kListenGraceNs / 2);
  listener = must(cm_create_id(b->ctx.get(), nullptr, CmPortSpace::kTcp));
  ASSERT_TRUE(cm_bind_addr(listener, SockAddr{Gid{}, uint16_t(kPort + 1)}).ok());
  ASSERT_TRUE(cm_listen(listener, 4).ok());
  const CmEvent ev = wait_event(*a);
  EXPECT_EQ(ev.event, CmEventType::kRejected);
  EXPECT_EQ(ev.status, cm::kRejInvalidServiceId);
  EXPECT_LT(now - start, cm::kListenGraceNs + 10'000'000);
}

// rdma_cm: a listener bound to one of our addresses takes only REQs whose IP
// header names that address; another of our addresses gets REJ 8.
TEST_F(Cm, ListenerBoundToOtherAddressRejects) {
  listen_and_resolve();
  ASSERT_TRUE(cm_destroy_id(listener).ok());
  const uint8_t other[4] = {10, 0, 0, 12};
  ASSERT_TRUE(b->ctx->net->gids().set(1, net::GidEntry{Gid::from_ipv4(other), net::GidType::kRoceV2, net::kNoVlan, b->mac}).ok());
  listener = must(cm_create_id(b->ctx.get(), nullptr, CmPortSpace::kTcp));
  ASSERT_TRUE(cm_bind_addr(listener, SockAddr{Gid::from_ipv4(other), kPort}).ok());
  ASSERT_TRUE(cm_listen(listener, 4).ok());
  ASSERT_TRUE(cm_connect(client, CmConnParam{}).ok());  // to b->gid, not `other`
  const CmEvent ev = wait_event(*a);
  EXPECT_EQ(ev.event, CmEventType::kRejected);
  EXPECT_EQ(ev.status, cm::kRejInvalidServiceId);
  EXPECT_EQ(cm_id_count(b->ctx.get()), 1u);  // the listener only
}

// rdma_cm: a bind to 127.0.0.1 binds the device's own IPv4 address (Linux
// binds the loopback netdev, which a uroce process has not), and port 0 an
// ephemeral port at once, as Linux rdma_bind_addr picks one: the id can
// listen, and a REQ to that address and port reaches it. A bind to ::1 on a
// device with no IPv6 RoCEv2 GID finds no address.
TEST_F(Cm, LoopbackBindIsTheDevicesAddressAndPortZeroIsEphemeral) {
  listener = must(cm_create_id(b->ctx.get(), nullptr, CmPortSpace::kTcp));
  const uint8_t lo[4] = {127, 0, 0, 1};
  ASSERT_TRUE(cm_bind_addr(listener, SockAddr{Gid::from_ipv4(lo), 0}).ok());
  EXPECT_EQ(listener->src.ip, b->gid);
  const uint16_t port = listener->src.port;
  EXPECT_NE(port, 0);
  ASSERT_TRUE(cm_listen(listener, 4).ok());
  ASSERT_NO_FATAL_FAILURE(resolve_client(CmPortSpace::kTcp, port));
  ASSERT_TRUE(cm_connect(client, CmConnParam{}).ok());
  const CmEvent ev = wait_event(*b);
  EXPECT_EQ(ev.event, CmEventType::kConnectRequest);
  EXPECT_EQ(ev.listen_id, listener);

  CmId* v6 = must(cm_create_id(b->ctx.get(), nullptr, CmPortSpace::kTcp));
  Gid v6_loopback;
  v6_loopback.raw[15] = 1;
  EXPECT_EQ(cm_bind_addr(v6, SockAddr{v6_loopback, 0}).code(), StatusCode::kNotFound);
  ASSERT_TRUE(cm_destroy_id(v6).ok());
}

// rdma_cm: a client bound to its address before it resolves (libfabric's
// verbs endpoints) sends from the address's RoCEv2 entry, the port's default
// RoCE mode as Linux's, not from the RoCEv1 entry ahead of it in the table
// (rxe drops RoCEv1).
TEST_F(Cm, BoundClientResolvesToTheRoceV2Entry) {
  listener = must(cm_create_id(b->ctx.get(), nullptr, CmPortSpace::kTcp));
  ASSERT_TRUE(cm_bind_addr(listener, SockAddr{Gid{}, kPort}).ok());
  ASSERT_TRUE(cm_listen(listener, 4).ok());
  net::GidTable& gids = a->ctx->net->gids();
  ASSERT_TRUE(gids.remove(0).ok());
  ASSERT_TRUE(gids.set(0, net::GidEntry{a->gid, net::GidType::kRoceV1, net::kNoVlan, a->mac}).ok());
  ASSERT_TRUE(gids.set(1, net::GidEntry{a->gid, net::GidType::kRoceV2, net::kNoVlan, a->mac}).ok());
  client = must(cm_create_id(a->ctx.get(), nullptr, CmPortSpace::kTcp));
  ASSERT_TRUE(cm_bind_addr(client, SockAddr{a->gid, 0}).ok());
  ASSERT_TRUE(cm_resolve_addr(client, nullptr, SockAddr{b->gid, kPort}, 2000).ok());
  ASSERT_EQ(wait_event(*a).event, CmEventType::kAddrResolved);
  EXPECT_EQ(client->route.sgid_index, 1);
}

// The consumer rejects: REJ reason 28 with its private data.
TEST_F(Cm, ConsumerRejectCarriesPrivateData) {
  listen_and_resolve();
  CmId* server = connect_request();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(cm_reject(server, "busy", 5).ok());
  const CmEvent ev = wait_event(*a);
  EXPECT_EQ(ev.event, CmEventType::kRejected);
  EXPECT_EQ(ev.status, cm::kRejConsumer);
  EXPECT_STREQ(reinterpret_cast<const char*>(ev.private_data), "busy");
  EXPECT_TRUE(cm_destroy_id(server).ok());
}

// A REQ the listener took but whose kConnectRequest the consumer never
// picked up, when the listener is destroyed: the request has no owner, so it
// is rejected (REJ 28, consumer defined) and its id goes with the listener,
// as Linux ucma / ib_cm do. Found by `uroce pingpong -R -T srq`: the next
// connection's REQ arrived in the same burst as the RTU, before the server
// re-listened, and its orphan id in REQ Rcvd leaked and MRAed the retries.
TEST_F(Cm, DestroyedListenerRejectsUndeliveredRequest) {
  listen_and_resolve();
  ASSERT_TRUE(cm_connect(client, CmConnParam{}).ok());
  // Receive: the REQ (b now holds a new id in REQ Rcvd and an undelivered event).
  for (int i = 0; i < 1000 && cm_id_count(b->ctx.get()) < 2; ++i) step();
  ASSERT_EQ(cm_id_count(b->ctx.get()), 2u);
  // Expect: destroying the listener rejects and frees the pending request.
  ASSERT_TRUE(cm_destroy_id(listener).ok());
  EXPECT_EQ(cm_id_count(b->ctx.get()), 0u);
  EXPECT_EQ(cnt(*b, CmCounter::rej_sent), 1u);
  const CmEvent ev = wait_event(*a);
  EXPECT_EQ(ev.event, CmEventType::kRejected);
  EXPECT_EQ(ev.status, cm::kRejConsumer);
  CmEvent none;
  EXPECT_EQ(cm_get_event(b->ctx.get(), &none), 0);  // the dropped kConnectRequest is gone
}

// An id destroyed in REQ Rcvd without accept or reject: REJ 28 goes out, so
// the active side stops retrying (Linux ib_cm's cm_destroy_id does the same).
TEST_F(Cm, DestroyingUnansweredRequestRejectsIt) {
  listen_and_resolve();
  CmId* server = connect_request();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(cm_destroy_id(server).ok());
  const CmEvent ev = wait_event(*a);
  EXPECT_EQ(ev.event, CmEventType::kRejected);
  EXPECT_EQ(ev.status, cm::kRejConsumer);
  EXPECT_EQ(cm_id_count(b->ctx.get()), 1u);  // the listener only
  EXPECT_EQ(sent(*a, CmAttr::kReq), 1u);
}

// IBA 12.9.2 + 12.9.8.1: the REP is lost; the active side's REQ times out and
// is sent again; the passive side, in REP Sent, answers the duplicate with the REP again.
TEST_F(Cm, LostRepIsResentOnDuplicateReq) {
  listen_and_resolve();
  drop_first(*b, CmAttr::kRep, 1);
  CmId* server = nullptr;
  ASSERT_NO_FATAL_FAILURE(establish(server));
  EXPECT_EQ(sent(*a, CmAttr::kReq), 2u);
  EXPECT_EQ(sent(*b, CmAttr::kRep), 2u);
  EXPECT_EQ(cnt(*a, CmCounter::mad_retries), 1u);
  EXPECT_EQ(cnt(*b, CmCounter::dup_req), 1u);
  send_one(client->qp, server->qp);
}

// IBA 12.6.6: a duplicate REQ before the consumer accepts gets an MRA; the
// active side then waits the MRA's service timeout instead of retrying.
TEST_F(Cm, DuplicateReqBeforeAcceptGetsMra) {
  listen_and_resolve();
  CmId* server = connect_request();
  ASSERT_NE(server, nullptr);
  run_for(cm::cm_timeout_ns(cm::kCmResponseTimeout) + 2 * cm::cm_timeout_ns(cm::kCmPacketLifeTime) + kStepNs * 4);
  EXPECT_EQ(sent(*a, CmAttr::kReq), 2u);  // retried once
  EXPECT_EQ(sent(*b, CmAttr::kMra), 1u);
  EXPECT_EQ(cnt(*a, CmCounter::mra_rcvd), 1u);
  run_for(20'000'000'000ull);  // far past the REQ timeout, inside the MRA's 68 s
  EXPECT_EQ(sent(*a, CmAttr::kReq), 2u);
  accept(server);
  EXPECT_EQ(wait_event(*a).event, CmEventType::kEstablished);
  EXPECT_EQ(wait_event(*b).event, CmEventType::kEstablished);
}

// IBA 12.9.8.2: the RTU is lost; the REP times out and is resent; the active
// side, established, answers the duplicate REP with the RTU again.
TEST_F(Cm, LostRtuIsResentOnDuplicateRep) {
  listen_and_resolve();
  drop_first(*a, CmAttr::kRtu, 1);
  CmId* server = nullptr;
  ASSERT_NO_FATAL_FAILURE(establish(server));
  EXPECT_EQ(sent(*b, CmAttr::kRep), 2u);
  EXPECT_EQ(sent(*a, CmAttr::kRtu), 2u);
  EXPECT_EQ(cnt(*a, CmCounter::dup_rep), 1u);
}

// A lost DREP: the DREQ is resent, the peer in time wait answers with the DREP again.
TEST_F(Cm, LostDrepIsResentOnDuplicateDreq) {
  listen_and_resolve();
  CmId* server = nullptr;
  ASSERT_NO_FATAL_FAILURE(establish(server));
  drop_first(*b, CmAttr::kDrep, 1);
  ASSERT_TRUE(cm_disconnect(client).ok());
  EXPECT_EQ(wait_event(*b).event, CmEventType::kDisconnected);
  EXPECT_EQ(wait_event(*a).event, CmEventType::kDisconnected);
  EXPECT_EQ(sent(*a, CmAttr::kDreq), 2u);
  EXPECT_EQ(sent(*b, CmAttr::kDrep), 2u);
  EXPECT_EQ(cnt(*b, CmCounter::dup_dreq), 1u);
}

// Every frame duplicated: the handshake still completes once, duplicates counted.
TEST_F(Cm, DuplicatedMadsEstablishOnce) {
  for (Side* s : {a.get(), b.get()}) {
    s->port.hook = [](const wire::PacketDesc& d) {
      return cm::is_gsi_packet(d) ? TestPort::Action::kDuplicate : TestPort::Action::kPass;
    };
  }
  listen_and_resolve();
  CmId* server = nullptr;
  ASSERT_NO_FATAL_FAILURE(establish(server));
  run_for(1'000'000);
  CmEvent ev;
  EXPECT_EQ(cm_get_event(a->ctx.get(), &ev), 0);
  EXPECT_EQ(cm_get_event(b->ctx.get(), &ev), 0);
  EXPECT_EQ(cm_id_count(b->ctx.get()), 2u);  // the listener and one connection, not two
  EXPECT_GE(cnt(*b, CmCounter::dup_req), 1u);
  EXPECT_GE(cnt(*a, CmCounter::dup_rep), 1u);
  send_one(client->qp, server->qp);
}

// The peer never answers: MaxCMRetries resends, then kUnreachable and a REJ timeout.
TEST_F(Cm, SilentPeerIsUnreachableAfterRetries) {
  listen_and_resolve();
  b->port.hook = [](const wire::PacketDesc& d) {
    return cm::is_gsi_packet(d) ? TestPort::Action::kDrop : TestPort::Action::kPass;
  };
  a->port.hook = b->port.hook;  // the REQs never arrive
  ASSERT_TRUE(cm_connect(client, CmConnParam{}).ok());
  const CmEvent ev = wait_event(*a, 200'000'000'000ull);
  EXPECT_EQ(ev.event, CmEventType::kUnreachable);
  EXPECT_EQ(sent(*a, CmAttr::kReq), 1u + cm::kCmMaxCmRetries);
  EXPECT_EQ(sent(*a, CmAttr::kRej), 1u);
  EXPECT_EQ(cnt(*a, CmCounter::cm_timeouts), 1u);
  EXPECT_EQ(client->qp->state, QpState::kErr);
}

// IBA 12.9.8.3.1: a new REQ from a QP that is still connected here is stale:
// REJ stale connection, and the old connection is torn down with a DREQ.
TEST_F(Cm, StaleReqIsRejectedAndOldConnectionDisconnected) {
  listen_and_resolve();
  CmId* server = nullptr;
  ASSERT_NO_FATAL_FAILURE(establish(server));
  // Replay a's REQ with a new comm ID, as a restarted peer reusing its QPN would.
  const size_t req_i = last_sent(*a, CmAttr::kReq);
  std::vector<uint8_t> f = a->port.sent_bytes[req_i];
  const wire::PacketDesc d = a->port.sent[req_i];
  cm::CmMad m;
  ASSERT_EQ(cm::decode({f.data() + d.payload_off, cm::kMadBytes}, m), cm::CmError::kOk);
  std::get<cm::ReqDesc>(m.body).local_comm_id ^= 0x5a5a0000;
  std::array<uint8_t, cm::kMadBytes> mad{};
  ASSERT_EQ(cm::encode(m, mad), cm::CmError::kOk);
  b->port.inject(frame_of(d, mad));
  run_for(100'000);
  EXPECT_EQ(cnt(*b, CmCounter::stale_conn), 1u);
  EXPECT_EQ(sent(*b, CmAttr::kRej), 1u);
  EXPECT_EQ(sent(*b, CmAttr::kDreq), 1u);
  EXPECT_EQ(wait_event(*b).event, CmEventType::kDisconnected);
}

// Malformed and misaddressed MADs on QP1: dropped and counted, nothing else happens.
TEST_F(Cm, MalformedMadsAreDroppedAndCounted) {
  listen_and_resolve();
  CmId* server = connect_request();
  ASSERT_NE(server, nullptr);
  const size_t req_i = last_sent(*a, CmAttr::kReq);
  const wire::PacketDesc d0 = a->port.sent[req_i];
  std::vector<uint8_t> mad(a->port.sent_bytes[req_i].begin() + d0.payload_off,
                           a->port.sent_bytes[req_i].begin() + d0.payload_off + cm::kMadBytes);
  auto inject = [&](wire::PacketDesc d, std::vector<uint8_t> payload) {
    d.payload_len = uint32_t(payload.size());
    d.pad = uint8_t((4 - payload.size() % 4) % 4);
    payload.resize(payload.size() + d.pad);
    std::vector<uint8_t> f(wire::frame_len(d));
    wire::build(d, {payload.data(), d.payload_len}, f);
    b->port.inject(f);
    run_for(100'000);
  };
  const uint64_t framing0 = cnt(*b, CmCounter::mad_drop_framing);
  wire::PacketDesc bad_qkey = d0;
  bad_qkey.deth_qkey = 0x11111111;  // IBA 13.5.3: QP1 takes only the GSI Q_Key
  inject(bad_qkey, mad);
  inject(d0, std::vector<uint8_t>(mad.begin(), mad.begin() + 100));  // short
  EXPECT_EQ(cnt(*b, CmCounter::mad_drop_framing), framing0 + 2);
  auto bad_version = mad;
  bad_version[2] = 1;  // CM class version 1
  inject(d0, bad_version);
  auto bad_base = mad;
  bad_base[0] = 2;
  inject(d0, bad_base);
  auto bad_rej = mad;
  bad_rej[17] = uint8_t(CmAttr::kRej);   // a REJ whose RejectedInfoLength is 0x7f (> 72)
  bad_rej[24 + 9] = 0xfe;
  inject(d0, bad_rej);
  EXPECT_EQ(cnt(*b, CmCounter::mad_drop_malformed), 3u);
  auto lap = mad;
  lap[17] = uint8_t(CmAttr::kLap);
  inject(d0, lap);
  EXPECT_EQ(cnt(*b, CmCounter::mad_drop_unsupported), 1u);
  auto rtu_unknown = mad;  // an RTU for a comm ID nobody has
  rtu_unknown[17] = uint8_t(CmAttr::kRtu);
  inject(d0, rtu_unknown);
  EXPECT_EQ(cnt(*b, CmCounter::mad_drop_unknown_id), 1u);
  // Still one request pending, and it still connects.
  CmEvent ev;
  EXPECT_EQ(cm_get_event(b->ctx.get(), &ev), 0);
  EXPECT_EQ(cm_id_count(b->ctx.get()), 2u);
  accept(server);
  EXPECT_EQ(wait_event(*a).event, CmEventType::kEstablished);
}

// IBA 12.11: SIDR for a UD service (rdma_cm's UDP port space): the reply
// carries the QPN and rdma_cm's Q_Key, and a datagram then reaches that QP.
TEST_F(Cm, SidrResolvesUdService) {
  listen_and_resolve(CmPortSpace::kUdp);
  CmId* server = connect_request();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(cm_create_qp(server, b->pd, qp_attr(*b, QpType::kUd)).ok());
  EXPECT_EQ(server->qp->state, QpState::kRts);  // as librdmacm's rdma_create_qp for UD
  ASSERT_TRUE(cm_accept(server, CmConnParam{}).ok());
  const CmEvent ev = wait_event(*a);
  ASSERT_EQ(ev.event, CmEventType::kEstablished);
  EXPECT_EQ(ev.ud_qp_num, server->qp->qp_num);
  EXPECT_EQ(ev.ud_qkey, kRdmaUdpQkey);
  EXPECT_EQ(ev.ud_ah.dmac, b->mac);
  EXPECT_EQ(sent(*a, CmAttr::kSidrReq), 1u);
  EXPECT_EQ(sent(*b, CmAttr::kSidrRep), 1u);
}

// No UD listener: SIDR REP with status 1 (no service): kUnreachable.
TEST_F(Cm, SidrWithoutListenerIsUnreachable) {
  listen_and_resolve(CmPortSpace::kUdp);
  ASSERT_TRUE(cm_destroy_id(listener).ok());
  ASSERT_TRUE(cm_connect(client, CmConnParam{}).ok());
  const CmEvent ev = wait_event(*a);
  EXPECT_EQ(ev.event, CmEventType::kUnreachable);
  EXPECT_EQ(ev.status, cm::kSidrNoService);
}

// A seeded storm of mutated MADs into a listener with a live connection and a
// pending request: every MAD the two sides exchanged, with random bytes
// changed, comm IDs pointed at live ids, attributes swapped, replayed out of
// order. Whatever arrives, nothing crashes (ASan/UBSan in CI), every drop is
// counted, no id appears without an event, and afterwards a new connection
// still works and every id and QP can be destroyed.
TEST_F(Cm, MutatedMadStormKeepsStateConsistent) {
  listen_and_resolve();
  CmId* server = nullptr;
  ASSERT_NO_FATAL_FAILURE(establish(server));
  // The MADs both sides sent so far, as (frame desc, 256 bytes).
  std::vector<std::pair<wire::PacketDesc, std::array<uint8_t, cm::kMadBytes>>> mads;
  for (Side* s : {a.get(), b.get()}) {
    for (size_t i = 0; i < s->port.sent.size(); ++i) {
      if (!cm::is_gsi_packet(s->port.sent[i])) continue;
      std::array<uint8_t, cm::kMadBytes> m{};
      std::memcpy(m.data(), s->port.sent_bytes[i].data() + s->port.sent[i].payload_off, cm::kMadBytes);
      mads.emplace_back(s->port.sent[i], m);
    }
  }
  ASSERT_GE(mads.size(), 3u);
  uint32_t seed = 0x5eedc0deu;
  auto rnd = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
  };
  size_t ids_from_events = 0;
  for (int round = 0; round < 3000; ++round) {
    auto [d, m] = mads[rnd() % mads.size()];
    const uint32_t kind = rnd() % 8;
    if (kind < 3) {  // flip a few bytes of the body
      for (int k = 0; k < 1 + int(rnd() % 4); ++k) m[cm::kMadHdrBytes + rnd() % cm::kMadDataBytes] ^= uint8_t(1u << (rnd() % 8));
    } else if (kind < 5) {  // another CM attribute with this body
      m[17] = uint8_t(0x10 + rnd() % 10);
    } else if (kind == 5) {  // any header byte
      m[rnd() % cm::kMadHdrBytes] = uint8_t(rnd());
    }  // else: a plain replay
    // Deliver to either side, as if from the other.
    Side& to = rnd() % 2 ? *a : *b;
    Side& from = &to == a.get() ? *b : *a;
    d.src_mac = from.mac;
    d.dst_mac = to.mac;
    d.sgid = from.gid;
    d.dgid = to.gid;
    to.port.inject(frame_of(d, m));
    now += (rnd() % 4 == 0) ? 5'000'000'000ull : kStepNs;  // sometimes let CM timers fire
    poll(a->ctx.get(), now);
    poll(b->ctx.get(), now);
    for (Side* s : {a.get(), b.get()}) {
      CmEvent ev;
      while (cm_get_event(s->ctx.get(), &ev)) {
        if (ev.event == CmEventType::kConnectRequest) {  // a new passive id: reject and free it
          ++ids_from_events;
          EXPECT_TRUE(cm_reject(ev.id, nullptr, 0).ok());
          EXPECT_TRUE(cm_destroy_id(ev.id).ok());
        }
      }
    }
    // Ids: a's client, b's listener and server; nothing else outlives its event.
    ASSERT_EQ(cm_id_count(a->ctx.get()), 1u) << "round " << round;
    ASSERT_EQ(cm_id_count(b->ctx.get()), 2u) << "round " << round;
  }
  const CmCounters ca = query_cm_counters(a->ctx.get()), cb = query_cm_counters(b->ctx.get());
  const uint64_t dropped = ca.get(CmCounter::mad_drop_malformed) + cb.get(CmCounter::mad_drop_malformed) +
                           ca.get(CmCounter::mad_drop_unsupported) + cb.get(CmCounter::mad_drop_unsupported) +
                           ca.get(CmCounter::mad_drop_unknown_id) + cb.get(CmCounter::mad_drop_unknown_id) +
                           ca.get(CmCounter::mad_drop_state) + cb.get(CmCounter::mad_drop_state);
  EXPECT_GT(dropped, 1000u);  // most of the storm is refused, and counted
  // Whatever state the storm left the old connection in, a new one works.
  ASSERT_TRUE(cm_destroy_id(client).ok());
  ASSERT_TRUE(cm_destroy_id(server).ok());
  ASSERT_NO_FATAL_FAILURE(resolve_client());
  CmId* fresh = nullptr;
  ASSERT_NO_FATAL_FAILURE(establish(fresh));
  send_one(client->qp, fresh->qp);
  ASSERT_TRUE(cm_destroy_id(client).ok());
  ASSERT_TRUE(cm_destroy_id(fresh).ok());
  ASSERT_TRUE(cm_destroy_id(listener).ok());
  EXPECT_EQ(cm_id_count(a->ctx.get()), 0u);
  EXPECT_EQ(cm_id_count(b->ctx.get()), 0u);
  std::printf("storm: %zu requests made ids, %llu MADs dropped and counted\n", ids_from_events,
              (unsigned long long)dropped);
}

}  // namespace
}  // namespace uroce::test
