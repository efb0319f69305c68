// qperf's control messages (apps/interop/qperf_proto.h) against the bytes stock qperf
// 0.4.11 sent. Golden vectors: TCP payloads on port 19765 in the guest's
// capture of the interop cell `qperf` (tests/interop/cm.py, 2026-11-30; the
// guest runs Debian 12's qperf 0.4.11-3 on rdma_rxe): the stock client's
// requests and node information (`qperf -cm1 -t 2 10.70.0.2 rc_lat rc_bw
// rc_rdma_read_bw`) and the stock server's statistics after rc_lat (`qperf`,
// our client). None of these bytes were made by uroce.
#include "apps/interop/qperf_proto.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace uroce::apps::qperf {
namespace {

std::vector<uint8_t> unhex(const std::string& h) {
  std::vector<uint8_t> b;
  for (size_t i = 0; i + 1 < h.size(); i += 2) b.push_back(uint8_t(std::stoi(h.substr(i, 2), nullptr, 16)));
  return b;
}
std::string zeros(size_t bytes) { return std::string(2 * bytes, '0'); }

// The stock client's REQ for rc_lat: version 0.4.11, index 16, msg_size 1, time 2, timeout 5,
// use_cm 1, everything else zero (200 bytes).
const std::vector<uint8_t> kReqRcLat =
    unhex("000004000b001000" + zeros(16) + "01000000" + zeros(32) + "02000000" "05000000" "01000000" + zeros(128));
// ... for rc_bw: index 13, msg_size 65536.
const std::vector<uint8_t> kReqRcBw =
    unhex("000004000b000d00" + zeros(16) + "00000100" + zeros(32) + "02000000" "05000000" "01000000" + zeros(128));
// The stock client's NODE with -cm1: vaddr, lid 0, qpn 0, psn 0, srqn 0, rkey 0x1070, alt_lid 0,
// rd_atomic 128 (rxe's max_qp_rd_atom), then 4 bytes of padding (stack garbage).
const std::vector<uint8_t> kNodeStockClient =
    unhex("00e0f2a57f550000000000000000000000000000000000007010000000000000" "80000000" "ff7f0000");
// The stock server's STAT after rc_lat: 1 CPU, 100 ticks/s, max_cqes 0, 9 start and 9 end
// times (ticks), send / receive / rem_send / rem_recv {bytes, msgs, errs}, 4 bytes of padding.
const std::vector<uint8_t> kStatStockServer = unhex(
    "01000000" "64000000" "00000000"
    "c1fd656600000000" "6401000000000000" "0000000000000000" "c203000000000000" "3805000000000000"
    "0000000000000000" "0000000000000000" "1901000000000000" "0000000000000000"
    "89fe6566000000006a010000000000000000000000000000dc03000000000000b4050000000000000000000000000000"
    "000000000000000038010000000000000000000000000000"
    "030300000000000003030000000000000000000000000000"
    "030300000000000003030000000000000000000000000000" + zeros(48) + zeros(4));

TEST(QperfProto, SizesAreTheStructsCSizes) {
  // qperf sends sizeof(REQ) = 8 + 16 * 4 + 2 * 64, sizeof(NODE) = 40, sizeof(STAT) = 256.
  EXPECT_EQ(kReqRcLat.size(), kReqBytes);
  EXPECT_EQ(kNodeStockClient.size(), kNodeBytes);
  EXPECT_EQ(kStatStockServer.size(), kStatBytes);
  EXPECT_EQ(sizeof(kSyncBefore) - 1, 27u);
  EXPECT_EQ(sizeof(kSyncAfter) - 1, 26u);
}

TEST(QperfProto, TestIndicesAreTheStockClients) {
  // Receive: the stock client's requests for rc_lat, rc_bw and rc_rdma_read_bw (index 16, 13, 17).
  EXPECT_EQ(decode_req(kReqRcLat.data()).req_index, *test_index("rc_lat"));
  EXPECT_EQ(decode_req(kReqRcBw.data()).req_index, *test_index("rc_bw"));
  EXPECT_EQ(*test_index("rc_rdma_read_bw"), 17);
  EXPECT_EQ(*test_index("conf"), 0);
  EXPECT_EQ(*test_index("quit"), 1);
  EXPECT_FALSE(test_index("rc_nonsense"));
}

TEST(QperfProto, StockRequestDecodes) {
  const Req q = decode_req(kReqRcLat.data());
  EXPECT_EQ(q.ver_maj, 0);
  EXPECT_EQ(q.ver_min, 4);
  EXPECT_EQ(q.ver_inc, 11);
  EXPECT_EQ(q.msg_size, 1u);
  EXPECT_EQ(q.time, 2u);
  EXPECT_EQ(q.timeout, 5u);
  EXPECT_EQ(q.use_cm, 1u);
  EXPECT_EQ(q.no_msgs, 0u);
  EXPECT_EQ(q.flip, 0u);
  EXPECT_EQ(std::string(q.id), "");
  EXPECT_EQ(decode_req(kReqRcBw.data()).msg_size, 65536u);
}

TEST(QperfProto, OurClientRequestIsTheStockClientsByteForByte) {
  // Expect: `uroce qperf -t 2 HOST rc_lat rc_bw` sends exactly what `qperf -cm1 -t 2 HOST ...` sends.
  const auto lat = encode_req(client_request(*test_index("rc_lat"), 1, 2, 0));
  const auto bw = encode_req(client_request(*test_index("rc_bw"), 65536, 2, 0));
  EXPECT_EQ(std::vector<uint8_t>(lat.begin(), lat.end()), kReqRcLat);
  EXPECT_EQ(std::vector<uint8_t>(bw.begin(), bw.end()), kReqRcBw);
  // -n replaces the time (qperf's client(): no default time once no_msgs is set).
  const Req n = client_request(16, 1, 2, 500);
  EXPECT_EQ(n.time, 0u);
  EXPECT_EQ(n.no_msgs, 500u);
}

TEST(QperfProto, StockNodeRoundTrips) {
  const Node n = decode_node(kNodeStockClient.data());
  EXPECT_EQ(n.vaddr, 0x557fa5f2e000ull);
  EXPECT_EQ(n.rkey, 0x1070u);
  EXPECT_EQ(n.qpn, 0u);  // with -cm1 the CM, not NODE, carries the QPN
  EXPECT_EQ(n.rd_atomic, 128u);
  const auto b = encode_node(n);  // the 36 bytes of fields again; our padding is zero
  EXPECT_TRUE(std::equal(b.begin(), b.begin() + 36, kNodeStockClient.begin()));
  EXPECT_EQ(b[36] | b[37] | b[38] | b[39], 0);
}

TEST(QperfProto, StockStatRoundTripsAndGivesItsRealTime) {
  const Stat s = decode_stat(kStatStockServer.data());
  EXPECT_EQ(s.no_cpus, 1u);
  EXPECT_EQ(s.no_ticks, 100u);  // sysconf(_SC_CLK_TCK)
  EXPECT_EQ(s.time_e[0] - s.time_s[0], 200u);  // -t 2 at 100 ticks/s
  EXPECT_DOUBLE_EQ(real_s(s), 2.0);
  EXPECT_EQ(s.s.msgs, 771u);
  EXPECT_EQ(s.r.msgs, 771u);
  EXPECT_EQ(s.r.bytes, 771u);  // 1-byte messages
  EXPECT_EQ(s.rem_r.msgs, 0u);
  const auto b = encode_stat(s);
  EXPECT_TRUE(std::equal(b.begin(), b.begin() + 252, kStatStockServer.begin()));
}

TEST(QperfProto, ResultsFollowQperfsRules) {
  // Local: 2.00 s real, 772 messages received; remote: the stock server's STAT (771 received).
  Stat l;
  l.no_ticks = 1'000'000;
  l.time_e[0] = 2'000'000;
  l.r.msgs = 772;
  l.r.bytes = 772;
  const Stat r = decode_stat(kStatStockServer.data());
  const Results res = calc(l, r);
  // latency = local real time / messages received by both: the one-way time.
  EXPECT_DOUBLE_EQ(res.latency_s, 2.0 / (772 + 771));
  // msg_rate with both sides receiving: both counts over the mean real time.
  EXPECT_DOUBLE_EQ(res.msg_rate, (772 + 771) / 2.0);
  // rc_bw: only the server receives, so bw = its bytes over its own time.
  Stat sender;
  sender.no_ticks = 100;
  sender.time_e[0] = 200;
  sender.s.bytes = 65536ull * 300;
  Stat receiver = sender;
  receiver.s.bytes = 0;
  receiver.r.bytes = 65536ull * 290;
  receiver.time_e[0] = 201;
  EXPECT_DOUBLE_EQ(calc(sender, receiver).recv_bw, 65536.0 * 290 / 2.01);
}

TEST(QperfProto, NumbersAsQperfShowsThem) {
  // place_val: three significant digits, trailing zeros dropped, commas from 1,000.
  EXPECT_EQ(qperf_number(407), "407");
  EXPECT_EQ(qperf_number(20.1), "20.1");
  EXPECT_EQ(qperf_number(20.10001), "20.1");
  EXPECT_EQ(qperf_number(1.1), "1.1");
  EXPECT_EQ(qperf_number(8.284), "8.28");
  EXPECT_EQ(qperf_number(0.5), "0.5");
  EXPECT_EQ(qperf_number(2), "2");
  EXPECT_EQ(qperf_number(2170.4), "2,170");
  EXPECT_EQ(qperf_number(1234567), "1,234,567");
}

}  // namespace
}  // namespace uroce::apps::qperf
