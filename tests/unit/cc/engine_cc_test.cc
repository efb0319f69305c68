// Congestion control as the engine runs it (stack/transport/qp_cc.h,
// stack/engine/engine.cc): the DCQCN notification point (CE-marked request ->
// CNP, IBA Annex A17.9.2), the reaction point (received CNP -> the QP's DCQCN
// cut), the pacer holding packets without dropping them, and RTT samples from
// ACKs for TIMELY. Two devices back to back (tests/unit/transport/fixture.h)
// on a virtual clock.
#include <array>
#include <cstring>

#include <gtest/gtest.h>

#include "stack/device/context.h"
#include "stack/transport/qp.h"
#include "stack/wire/checksum.h"
#include "stack/wire/opcodes.h"
#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

using Action = TestPort::Action;

// RFC 3168: set CE in an IPv4 RoCEv2 frame and fix the header checksum (the
// ICRC masks the TOS byte, A17.3.3, so it stays valid), as a switch does.
void mark_ce(std::vector<uint8_t>& f) {
  uint8_t* ip = f.data() + 14;
  ip[1] |= 3;
  ip[10] = ip[11] = 0;
  const uint16_t c = wire::csum_finish(wire::csum_partial({ip, sizeof(wire::Ipv4Hdr)}));
  ip[10] = uint8_t(c >> 8);
  ip[11] = uint8_t(c);
}

class EngineCc : public Pair {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(init_eal().ok()); }
  const transport::QpCc& cc_of(Qp* qp) { return transport::impl(qp).cc; }
  // Both devices run DCQCN on a 1 Gb/s line with a 2 KiB pacer burst; with
  // no CNP the rate stays at line rate and only the pacer holds packets.
  void open_paced_gigabit() {
    PairOptions o;
    o.device = [](DeviceConfig& c) {
      c.cc.algorithm = CcAlgorithm::kDcqcn;
      c.cc.line_rate_mbps = 1000;
      c.cc.pacer_burst_bytes = 2048;
    };
    open(o);
  }
};

TEST_F(EngineCc, A17_9_2_CeMarkedRequestsMakeOneCnpPerInterval) {
  // Receive: a 4-packet WRITE from a, every packet CE-marked, all in one
  // poll; 10 us later one more CE-marked packet (the 4 us interval passed).
  // Expect: b sends 2 CNPs (BTH opcode 0x81, DestQP a's QP, PSN 0, DSCP 48,
  // Not-ECT); counters: 5 marked, 2 sent, 3 suppressed by the interval.
  PairOptions o;
  o.device = [](DeviceConfig& c) { c.ecn = true; };
  open(o);
  a->port.keep_bytes = true;
  a->port.hook = [](const wire::PacketDesc&) { return Action::kDrop; };
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 4096, 0).ok());
  run_for(2000);
  ASSERT_EQ(a->port.sent_bytes.size(), 4u);
  for (auto f : a->port.sent_bytes) {
    mark_ce(f);
    b->port.inject(f);
  }
  run_for(10'000);
  auto again = a->port.sent_bytes[0];
  mark_ce(again);
  b->port.inject(again);  // a duplicate now: still a CE-marked request
  run_for(2000);
  std::vector<wire::PacketDesc> cnps;
  for (const auto& d : b->port.sent) {
    if (d.opcode == wire::kOpcodeCnp) cnps.push_back(d);
  }
  ASSERT_EQ(cnps.size(), 2u);
  for (const auto& d : cnps) {
    EXPECT_EQ(d.dest_qp, a->qp->qp_num);
    EXPECT_EQ(d.psn, 0u);
    EXPECT_EQ(d.traffic_class, 48 << 2);  // CNP_DSCP 48, ECN 00
    EXPECT_EQ(d.payload_len, 0u);
  }
  EXPECT_EQ(b->count(Counter::np_ecn_marked_roce_packets), 5u);
  EXPECT_EQ(b->count(Counter::np_cnp_sent), 2u);
  EXPECT_EQ(b->count(Counter::np_cnp_suppressed), 3u);
  // a received them: its QP runs no DCQCN here, so they are only counted.
  EXPECT_EQ(a->count(Counter::rcvd_cnp), 2u);
  EXPECT_EQ(a->count(Counter::rp_cnp_ignored), 2u);
}

TEST_F(EngineCc, CnpCutsTheDcqcnRateOfItsQp) {
  // Events: a runs DCQCN (ConnectX defaults, 100 Gb/s); b sends a CNP to a's QP.
  // Expect: rcvd_cnp 1, rp_cnp_handled 1 (device and QP counters); a's rate
  // cut by alpha/2 with alpha = initial_alpha_value 1023/1024:
  // 100e9 - (100e9 * (1023 << 10) >> 21) = 50,048,828,125 b/s.
  PairOptions o;
  o.device = [](DeviceConfig& c) { c.cc.algorithm = CcAlgorithm::kDcqcn; };
  open(o);
  EXPECT_EQ(cc_of(a->qp).rate_bps(), 100'000'000'000u);
  b->port.keep_bytes = true;
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 64, 0).ok());
  wait_wc(a->scq);
  // The CNP: b's ACK to a with the opcode and body of a CNP.
  wire::PacketDesc d = b->port.sent.back();
  d.opcode = wire::kOpcodeCnp;
  d.psn = 0;
  d.payload_len = 0;
  d.pad = 0;
  d.ack_req = false;
  a->port.inject(frame_of(d, {}));
  run_for(1000);
  EXPECT_EQ(a->count(Counter::rcvd_cnp), 1u);
  EXPECT_EQ(a->count(Counter::rp_cnp_handled), 1u);
  EXPECT_EQ(query_qp_counters(a->qp).get(Counter::rp_cnp_handled), 1u);
  EXPECT_EQ(cc_of(a->qp).rate_bps(), 50'048'828'125u);
  // A CNP to a QPN nobody has is counted and ignored.
  d.dest_qp = a->qp->qp_num + 100;
  a->port.inject(frame_of(d, {}));
  run_for(1000);
  EXPECT_EQ(a->count(Counter::rp_cnp_ignored), 1u);
}

TEST_F(EngineCc, PacerHoldsPacketsAndNeverDropsThem) {
  // Events: a runs DCQCN on a 1 Gb/s line (no CNP: it stays at line rate),
  // pacer burst 2 KiB; a 64 KiB WRITE at path MTU 1024.
  // Expect: every packet leaves once, none retransmitted; the pacer held
  // the requester (cc_tx_paced > 0); the WRITE takes at least its wire time
  // at 1 Gb/s (64 frames of 1024 + 82 bytes of headers/ICRC + 24 wire
  // overhead: 66,048 bytes * 8 ns = 528 us, less the 2 KiB burst).
  open_paced_gigabit();
  const uint64_t t0 = now;
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 65536, 0).ok());
  const Wc wc = wait_wc(a->scq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_GE(now - t0, 500'000u);
  EXPECT_LT(now - t0, 600'000u);
  EXPECT_EQ(count_sent(a->port.sent, wire::kRcWriteMiddle), 62u);
  EXPECT_EQ(a->count(Counter::retransmits), 0u);
  EXPECT_GT(a->count(Counter::cc_tx_paced), 0u);
}

TEST_F(EngineCc, CeMarkedReadResponsesCutTheResponderRate) {
  // The NP sits at the receiver of the congested data: for a READ that is
  // the requester a, whose CNPs go to the responder b (A17.9.2: the CNP's
  // DestQP is the QP that sent the marked packet), whose RP cuts the rate of
  // its READ responses.
  // Receive: b's 4 READ response packets of a 4 KiB READ, CE-marked, at a.
  // Expect: a sends 1 CNP (4 us interval) with DestQP b's QP; b handles it
  // (rp_cnp_handled 1) and its DCQCN rate is cut by alpha/2 with alpha =
  // 1023/1024: 50,048,828,125 b/s. The READ completes.
  PairOptions o;
  o.device = [](DeviceConfig& c) {
    c.ecn = true;
    c.cc.algorithm = CcAlgorithm::kDcqcn;
  };
  open(o);
  b->port.keep_bytes = true;
  b->port.hook = [](const wire::PacketDesc& d) {
    return d.opcode >= wire::kRcReadResponseFirst && d.opcode <= wire::kRcReadResponseOnly ? Action::kDrop
                                                                                            : Action::kPass;
  };
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 4096, 0).ok());
  run_for(2000);
  std::vector<std::vector<uint8_t>> resp;
  for (size_t i = 0; i < b->port.sent.size(); ++i) {
    const uint8_t op = b->port.sent[i].opcode;
    if (op >= wire::kRcReadResponseFirst && op <= wire::kRcReadResponseOnly) resp.push_back(b->port.sent_bytes[i]);
  }
  ASSERT_EQ(resp.size(), 4u);
  b->port.hook = nullptr;
  for (auto& f : resp) {
    mark_ce(f);
    a->port.inject(f);
  }
  const Wc wc = wait_wc(a->scq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  std::vector<wire::PacketDesc> cnps;
  for (const auto& d : a->port.sent) {
    if (d.opcode == wire::kOpcodeCnp) cnps.push_back(d);
  }
  ASSERT_EQ(cnps.size(), 1u);
  EXPECT_EQ(cnps[0].dest_qp, b->qp->qp_num);
  EXPECT_EQ(a->count(Counter::np_ecn_marked_roce_packets), 4u);
  EXPECT_EQ(a->count(Counter::np_cnp_suppressed), 3u);
  EXPECT_EQ(b->count(Counter::rp_cnp_handled), 1u);
  EXPECT_EQ(cc_of(b->qp).rate_bps(), 50'048'828'125u);
}

TEST_F(EngineCc, PacerHoldsReadResponses) {
  // Events: both sides run DCQCN on a 1 Gb/s line (no CNP: line rate), pacer
  // burst 2 KiB; a READs 64 KiB from b at path MTU 1024.
  // Expect: the responder's pacer holds its READ responses (b's
  // cc_tx_paced > 0) and the READ takes at least their wire time at 1 Gb/s
  // (64 responses of 1024 + 78 bytes of headers/ICRC + 24 wire overhead:
  // 72,064 bytes * 8 ns = 577 us, less the 2 KiB burst); none is resent.
  open_paced_gigabit();
  const uint64_t t0 = now;
  ASSERT_TRUE(post(WrOpcode::kRdmaRead, 1, 0, 65536, 0).ok());
  const Wc wc = wait_wc(a->scq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_GE(now - t0, 550'000u);
  EXPECT_LT(now - t0, 650'000u);
  EXPECT_EQ(count_sent(b->port.sent, wire::kRcReadResponseMiddle), 62u);
  EXPECT_GT(b->count(Counter::cc_tx_paced), 0u);
  EXPECT_EQ(a->count(Counter::retransmits), 0u);
}

TEST_F(EngineCc, AckGivesTimelyAnRttSampleFromEngineTimestamps) {
  // Events: a runs TIMELY; b's ACK of a 1-packet WRITE is held 20 us.
  // Expect: one RTT sample, 20..22 us (the engine's own send and receive
  // times, 1 us poll steps).
  PairOptions o;
  o.device = [](DeviceConfig& c) { c.cc.algorithm = CcAlgorithm::kTimely; };
  open(o);
  b->port.hook = [](const wire::PacketDesc& d) {
    return d.opcode == wire::kRcAcknowledge ? Action::kHold : Action::kPass;
  };
  ASSERT_TRUE(post(WrOpcode::kRdmaWrite, 1, 0, 64, 0).ok());
  run_for(20'000);
  b->port.hook = nullptr;
  b->port.release_held();
  wait_wc(a->scq);
  EXPECT_EQ(a->count(Counter::cc_rtt_samples), 1u);
  EXPECT_GE(cc_of(a->qp).last_rtt_ns(), 20'000u);
  EXPECT_LE(cc_of(a->qp).last_rtt_ns(), 22'000u);
}

// A QP sprayed over two paths of fixed, different delays (round trips of 100
// and 300 us, between TIMELY's T_low and T_high), one timed packet at a time
// on alternate paths, the sampler told each packet's path as the requester
// tells it (stack/transport/requester.cc). Expect: with each sample's
// gradient taken against the previous sample of its own path (what
// completer.cc passes for a sprayed QP) there is no gradient and the rate
// stays at line rate; taken against the QP's previous sample, the same
// samples read as gradients of +-200 us and cut the rate.
TEST(QpCcPaths, TimelyGradientPerPathSeesNoFalseGradient) {
  CcConfig cfg;
  cfg.algorithm = CcAlgorithm::kTimely;
  struct Out {
    int64_t rtt_diff_ns;
    uint64_t rate_bps;
    uint64_t samples;
  };
  auto run = [&](bool per_path) {
    transport::QpCc cc;
    cc.init(cfg, QpType::kRc);
    std::array<uint64_t, transport::kMaxPaths> prev{};
    uint64_t t = 0;
    for (uint32_t psn = 0; psn < 40; ++psn) {
      const uint8_t path = uint8_t(psn % 2);
      cc.on_sent(t, 1000, psn, true, false, path);
      t += path ? 300'000 : 100'000;
      cc.on_acked(t, psn + 1, 1000, per_path ? prev.data() : nullptr);
    }
    const auto* timely = cc.algorithm().get_if<cc::Timely>();
    EXPECT_NE(timely, nullptr);
    return Out{timely ? timely->rtt_diff_ns() : -1, cc.rate_bps(), cc.rtt_samples()};
  };
  const Out per_path = run(true);
  EXPECT_EQ(per_path.samples, 40u);
  EXPECT_EQ(per_path.rtt_diff_ns, 0);
  EXPECT_EQ(per_path.rate_bps, 100'000'000'000u);
  const Out qp_wide = run(false);
  EXPECT_EQ(qp_wide.samples, 40u);
  EXPECT_NE(qp_wide.rtt_diff_ns, 0);
  EXPECT_LT(qp_wide.rate_bps, 50'000'000'000u);
}

}  // namespace
}  // namespace uroce::test
