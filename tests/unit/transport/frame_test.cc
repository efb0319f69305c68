// Transmit frames (stack/transport/frame.cc): the path a QP's frames take
// from its AV's source GID entry (A17.4.4 RoCEv2 / A16 RoCEv1 GIDs, IEEE
// 802.1Q tags), the DSCP/ECN of every frame (A17.9, RFC 2474, RFC 3168), and
// zero-copy frames whose payload is registered memory attached in place.
// Each test runs a full RC exchange (SEND, RDMA WRITE, RDMA READ over
// several packets) and then checks every frame both ends sent, as
// wire::parse decoded it from the captured bytes.
#include <cstring>
#include <span>
#include <string>

#include "stack/device/context.h"
#include "stack/transport/frame.h"
#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

constexpr uint16_t kVlan = 100;

class Frames : public Pair {
 protected:
  // SEND 3100 B, WRITE 2100 B, READ 2600 B at MTU 1024: first/middle/last
  // packets, ACKs and READ responses in both directions.
  void exchange() {
    fill(a->buf, 0, 3100, 1);
    fill(a->buf, 8192, 2100, 2);
    fill(b->buf, 16384, 2600, 3);
    ASSERT_TRUE(b->post_recv(7, 0, 4096).ok());
    ASSERT_TRUE(post(WrOpcode::kSend, 1, 0, 3100).ok());
    ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 2, 8192, 2100, 8192).ok());
    ASSERT_TRUE(post(WrOpcode::kRdmaRead, 3, 32768, 2600, 16384).ok());
    const Wc r = wait_wc(b->rcq);
    EXPECT_EQ(r.status, WcStatus::kSuccess);
    EXPECT_EQ(r.byte_len, 3100u);
    for (uint64_t id : {1u, 2u, 3u}) {
      const Wc s = wait_wc(a->scq);
      EXPECT_EQ(s.status, WcStatus::kSuccess) << wc_status_str(s.status);
      EXPECT_EQ(s.wr_id, id);
    }
    EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), 3100), 0);
    EXPECT_EQ(std::memcmp(a->buf.data() + 8192, b->buf.data() + 8192, 2100), 0);
    EXPECT_EQ(std::memcmp(a->buf.data() + 32768, b->buf.data() + 16384, 2600), 0);
    ASSERT_GE(a->port.sent.size(), 6u);
    ASSERT_GE(b->port.sent.size(), 3u);  // READ responses (they acknowledge the SEND and WRITE too)
    EXPECT_EQ(a->count(Counter::rx_drop_wrong_mac) + b->count(Counter::rx_drop_wrong_mac), 0u);
    EXPECT_EQ(a->count(Counter::rx_drop_wrong_gid) + b->count(Counter::rx_drop_wrong_gid), 0u);
  }
  // Calls check(frame, sender) for every frame either side sent.
  template <typename F>
  void each_frame(F&& check) {
    for (Side* s : {a.get(), b.get()}) {
      for (const wire::PacketDesc& d : s->port.sent) check(d, *s);
    }
  }
  static const net::GidEntry& entry(const Side& s, uint8_t index) { return *s.ctx->net->gids().at(index); }
};

// Path: GID index 1 is an IPv4 GID on VLAN 100 with a MAC of its own; the
// device's RoCE priority is 5. Expect: the exchange completes; every frame is
// 802.1Q tagged VID 100 PCP 5, from that MAC and GID, to the peer's.
TEST_F(Frames, VlanTaggedRcExchange) {
  PairOptions o;
  o.device = [](DeviceConfig& c) { c.vlan_pcp = 5; };
  o.gids = [](Side& s) {
    const MacAddr vmac{{0x02, 0, 0, 0, 0x64, s.mac.b[5]}};
    ASSERT_TRUE(s.ctx->net->gids()
                    .set(1, net::GidEntry{net::ipv4_gid(10, 100, 0, s.mac.b[5]), net::GidType::kRoceV2, kVlan, vmac})
                    .ok());
  };
  o.sgid_index = 1;
  open(o);
  exchange();
  each_frame([&](const wire::PacketDesc& d, const Side& from) {
    const Side& to = &from == a.get() ? *b : *a;
    EXPECT_TRUE(d.has_vlan);
    EXPECT_EQ(d.vlan_tci & 0x0fff, kVlan);
    EXPECT_EQ(d.vlan_tci >> 13, 5);
    EXPECT_EQ(d.l3, wire::L3Kind::kIpv4);
    EXPECT_EQ(d.src_mac, entry(from, 1).mac);
    EXPECT_EQ(d.dst_mac, entry(to, 1).mac);
    EXPECT_EQ(d.sgid, entry(from, 1).gid);
    EXPECT_EQ(d.dgid, entry(to, 1).gid);
  });
}

// Path: GID index 1 is the RoCEv1 link-local GID of the MAC. Expect: the
// exchange completes; every frame is Ethertype 0x8915 with a GRH (no IP, no
// UDP) carrying the link-local GIDs.
TEST_F(Frames, RoceV1RcExchange) {
  PairOptions o;
  o.gids = [](Side& s) {
    ASSERT_TRUE(s.ctx->net->gids()
                    .set(1, net::GidEntry{net::link_local_gid(s.mac), net::GidType::kRoceV1, net::kNoVlan, s.mac})
                    .ok());
  };
  o.sgid_index = 1;
  open(o);
  exchange();
  each_frame([&](const wire::PacketDesc& d, const Side& from) {
    EXPECT_EQ(d.l3, wire::L3Kind::kGrh);
    EXPECT_FALSE(d.has_vlan);
    EXPECT_EQ(d.sgid, net::link_local_gid(from.mac));
  });
}

// Path: GID index 1 is an IPv6 RoCEv2 GID (index 0 stays IPv4). Expect: the
// exchange completes over IPv6 from the index-1 GIDs.
TEST_F(Frames, SgidIndex1Ipv6) {
  PairOptions o;
  o.gids = [](Side& s) {
    const Gid g = *net::parse_gid(s.mac.b[5] == 1 ? "fd00::1" : "fd00::2");
    ASSERT_TRUE(s.ctx->net->gids().set(1, net::GidEntry{g, net::GidType::kRoceV2, net::kNoVlan, s.mac}).ok());
  };
  o.sgid_index = 1;
  open(o);
  exchange();
  each_frame([&](const wire::PacketDesc& d, const Side& from) {
    EXPECT_EQ(d.l3, wire::L3Kind::kIpv6);
    EXPECT_EQ(d.sgid, entry(from, 1).gid);
    EXPECT_FALSE(d.has_vlan);
  });
}

// QoS: no configuration. Expect: TOS 0 on every frame (ECN off by default:
// nothing reacts to CE yet).
TEST_F(Frames, DefaultTrafficClassIsZero) {
  open();
  exchange();
  each_frame([](const wire::PacketDesc& d, const Side&) { EXPECT_EQ(d.traffic_class, 0); });
}

// QoS: device DSCP 26 with ECN on, AVs asking for nothing. Expect: every
// frame (requests, READ responses, ACKs) carries DSCP 26 and ECT(0).
TEST_F(Frames, DeviceDscpAndEcnOnEveryFrame) {
  PairOptions o;
  o.device = [](DeviceConfig& c) {
    c.dscp = 26;
    c.ecn = true;
  };
  open(o);
  exchange();
  each_frame([](const wire::PacketDesc& d, const Side&) {
    EXPECT_EQ(d.traffic_class >> 2, 26);
    EXPECT_EQ(d.ecn(), uint8_t(net::Ecn::kEct0));
  });
}

// QoS: device DSCP 26, ECN off; after a first exchange the AVs are changed
// to ask for DSCP 10 with CE. Expect: from then on the AV's DSCP wins (the
// QP's header template is remade after modify_qp), CE is never originated
// (Not-ECT goes out); with force_dscp, the device's DSCP wins.
TEST_F(Frames, AvDscpAndForcedDscp) {
  for (bool force : {false, true}) {
    SCOPED_TRACE(force ? "force_dscp" : "av dscp");
    PairOptions o;
    o.device = [force](DeviceConfig& c) {
      c.dscp = 26;
      c.force_dscp = force;
    };
    open(o);
    exchange();
    each_frame([](const wire::PacketDesc& d, const Side&) { EXPECT_EQ(d.traffic_class >> 2, 26); });
    for (Side* s : {a.get(), b.get()}) s->port.sent.clear();
    for (Side* s : {a.get(), b.get()}) {  // re-path both QPs with traffic class DSCP 10 | CE
      QpAttr at;
      QpInitAttr ia;
      ASSERT_TRUE(query_qp(s->qp, &at, &ia).ok());
      at.ah_attr.traffic_class = uint8_t(10 << 2 | 3);
      at.qp_state = QpState::kSqd;
      ASSERT_TRUE(modify_qp(s->qp, at, kQpState).ok());
      ASSERT_TRUE(modify_qp(s->qp, at, kQpState | kQpAv).ok());
      at.qp_state = QpState::kRts;
      ASSERT_TRUE(modify_qp(s->qp, at, kQpState).ok());
    }
    exchange();
    each_frame([force](const wire::PacketDesc& d, const Side&) {
      EXPECT_EQ(d.traffic_class >> 2, force ? 26 : 10);
      EXPECT_EQ(d.ecn(), uint8_t(net::Ecn::kNotEct));
    });
  }
}

// QoS: the device's policy changed on a running pair (NetStack::set_qos:
// DSCP 26 -> 46, ECN off). Expect: every frame after it carries the new
// traffic class, though each QP made its header template under the old one.
TEST_F(Frames, QosChangeReachesConnectedQps) {
  open();
  exchange();
  for (Side* s : {a.get(), b.get()}) {
    net::TrafficClassConfig q = s->ctx->net->qos();
    q.dscp = 46;
    q.ecn = net::Ecn::kNotEct;
    ASSERT_TRUE(s->ctx->net->set_qos(q).ok());
    s->port.sent.clear();
  }
  exchange();
  each_frame([](const wire::PacketDesc& d, const Side&) {
    EXPECT_EQ(d.traffic_class >> 2, 46);
    EXPECT_EQ(d.ecn(), uint8_t(net::Ecn::kNotEct));
  });
}

// UD: an AH from GID index 1 on VLAN 100. Expect: the datagram is tagged and
// received (the receiver's GID on that VLAN matches).
TEST_F(Frames, UdAhFromVlanGid) {
  PairOptions o;
  o.type = QpType::kUd;
  o.gids = [](Side& s) {
    ASSERT_TRUE(s.ctx->net->gids()
                    .set(1, net::GidEntry{net::ipv4_gid(10, 100, 0, s.mac.b[5]), net::GidType::kRoceV2, kVlan, s.mac})
                    .ok());
  };
  open(o);
  AhAttr at;
  at.dgid = entry(*b, 1).gid;
  at.dmac = b->mac;
  at.sgid_index = 1;
  at.sl = 6;
  Ah* ah = must(create_ah(a->pd, at));
  fill(a->buf, 0, 500, 9);
  ASSERT_TRUE(b->post_recv(1, 0, 40 + 500).ok());
  Sge g = a->sge(0, 500);
  SendWr wr = ud_send_wr(0, &g, ah, b->qp->qp_num, opt.qkey).signaled();
  ASSERT_TRUE(post_send(a->qp, &wr, nullptr).ok());
  const Wc r = wait_wc(b->rcq);
  EXPECT_EQ(r.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data() + 40, 500), 0);
  ASSERT_EQ(a->port.sent.size(), 1u);
  EXPECT_TRUE(a->port.sent[0].has_vlan);
  EXPECT_EQ(a->port.sent[0].vlan_tci, uint16_t(6 << 13 | kVlan));  // PCP from the AH's SL
  EXPECT_EQ(a->port.sent[0].sgid, entry(*a, 1).gid);
}

// Each frame is byte for byte what the copy path builds from the same fields
// and payload (write_headers, payload copy, finish_frame: wire::build); parse
// has verified its ICRC.
void expect_copy_path_bytes(const std::vector<std::vector<uint8_t>>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    wire::PacketDesc d;
    ASSERT_EQ(wire::parse(frames[i], d), wire::ParseError::kOk) << "frame " << i;
    const std::vector<uint8_t> want =
        frame_of(d, std::span<const uint8_t>(frames[i].data() + d.payload_off, d.payload_len));
    ASSERT_EQ(frames[i].size(), want.size()) << "frame " << i;
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(frames[i][k], want[k]) << "frame " << i << " byte " << k << " of " << want.size();
    }
  }
}

// The three paths the zero-copy tests build frames on.
PairOptions path_options(int path) {
  PairOptions o;
  if (path == 1) {  // VLAN-tagged IPv4
    o.gids = [](Side& s) {
      ASSERT_TRUE(
          s.ctx->net->gids()
              .set(1, net::GidEntry{net::ipv4_gid(10, 100, 0, s.mac.b[5]), net::GidType::kRoceV2, kVlan, s.mac})
              .ok());
    };
    o.sgid_index = 1;
  } else if (path == 2) {  // RoCEv1
    o.gids = [](Side& s) {
      ASSERT_TRUE(s.ctx->net->gids()
                      .set(1, net::GidEntry{net::link_local_gid(s.mac), net::GidType::kRoceV1, net::kNoVlan, s.mac})
                      .ok());
    };
    o.sgid_index = 1;
  }
  return o;
}

// Zero-copy: the exchange with payloads of 512 bytes and more attached from
// registered memory, on IPv4, VLAN and RoCEv1 paths. Expect: every frame
// both ways is byte for byte the copy path's frame of the same fields and
// payload, with a valid ICRC; the data arrives; the counters split exactly at
// the threshold (a: SEND 1024x3 + 28, WRITE 1024x2 + 52; b: READ responses
// 1024x2 + 552), one chained frame per zero-copy frame; no region is left
// referenced. With zero-copy off the same exchange copies all 7 of a's.
TEST_F(Frames, ZeroCopyFramesAreTheCopyPathsBytes) {
  for (int path = 0; path < 3; ++path) {
    for (bool zc : {false, true}) {
      SCOPED_TRACE("path " + std::to_string(path) + (zc ? " zero-copy" : " copy"));
      PairOptions o = path_options(path);
      o.device = [zc](DeviceConfig& c) { c.tx_zero_copy = zc; };
      open(o);
      a->port.keep_bytes = b->port.keep_bytes = true;
      exchange();
      expect_copy_path_bytes(a->port.sent_bytes);
      expect_copy_path_bytes(b->port.sent_bytes);
      EXPECT_EQ(a->count(Counter::rx_drop_bad_icrc) + b->count(Counter::rx_drop_bad_icrc), 0u);
      EXPECT_EQ(a->count(Counter::tx_zero_copy), zc ? 5u : 0u);
      EXPECT_EQ(a->count(Counter::tx_copied), zc ? 2u : 7u);
      EXPECT_EQ(b->count(Counter::tx_zero_copy), zc ? 3u : 0u);
      EXPECT_EQ(b->count(Counter::tx_copied), zc ? 0u : 3u);
      EXPECT_EQ(a->port.chained, zc ? 5u : 0u);
      EXPECT_EQ(b->port.chained, zc ? 3u : 0u);
      EXPECT_EQ(a->ctx->mrs.tx_refs(a->mr->lkey).load(), 0u);
      EXPECT_EQ(b->ctx->mrs.tx_refs(b->mr->lkey).load(), 0u);
    }
  }
}

// Zero-copy: a port without tx_multiseg. Expect: every payload copied, no
// chained frame, the exchange completes.
TEST_F(Frames, ZeroCopyFallsBackToCopyWithoutMultisegPort) {
  PairOptions o;
  o.device = [](DeviceConfig& c) { c.tx_zero_copy = true; };
  o.port_multiseg = false;
  open(o);
  exchange();
  EXPECT_EQ(a->count(Counter::tx_zero_copy) + b->count(Counter::tx_zero_copy), 0u);
  EXPECT_EQ(a->count(Counter::tx_copied), 7u);
  EXPECT_EQ(a->port.chained + b->port.chained, 0u);
}

// Zero-copy: the wire holds a's WRITE frames (their payload still points into
// a's region). Expect: dereg_mr is kBusy while they are held; once they are
// delivered (and freed) the WRITE completes and dereg_mr succeeds.
TEST_F(Frames, ZeroCopyDeregMrBusyWhileFramesInFlight) {
  PairOptions o;
  o.device = [](DeviceConfig& c) { c.tx_zero_copy = true; };
  open(o);
  a->port.hook = [](const wire::PacketDesc& d) {
    return d.payload_len ? TestPort::Action::kHold : TestPort::Action::kPass;
  };
  fill(a->buf, 0, 2048, 4);
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 2048).ok());
  run_for(5'000);
  ASSERT_EQ(a->port.chained, 2u);
  EXPECT_EQ(a->ctx->mrs.tx_refs(a->mr->lkey).load(), 2u);
  EXPECT_EQ(dereg_mr(a->mr).code(), StatusCode::kBusy);
  a->port.hook = nullptr;
  a->port.release_held();
  EXPECT_EQ(a->ctx->mrs.tx_refs(a->mr->lkey).load(), 0u);
  const Wc s = wait_wc(a->scq);
  EXPECT_EQ(s.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(a->buf.data(), b->buf.data(), 2048), 0);
  EXPECT_TRUE(dereg_mr(a->mr).ok());
}

// The UDP source port is derived from both QPNs as rxe does (A17.4.5.2;
// tests/data rxe captures: QPN 0x11<->0x11 -> 49441, 0x11<->0x123 -> 54099).
TEST(UdpSourcePort, MatchesRxe) {
  EXPECT_EQ(transport::roce_udp_sport(0x11, 0x11), 49441);
  EXPECT_EQ(transport::roce_udp_sport(0x11, 0x123), 54099);
  EXPECT_EQ(transport::roce_udp_sport(0x123, 0x11), 54099);
}

}  // namespace
}  // namespace uroce::test
