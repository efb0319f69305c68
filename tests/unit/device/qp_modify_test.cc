// modify_qp against IBA 10.3.1 (the QP state machine) and 11.2.5.2 Table 91
// (required and optional attributes per transition, attribute ranges).
#include "stack/device/context.h"
#include "tests/unit/transport/fixture.h"

namespace uroce::test {
namespace {

class QpModify : public ::testing::Test {
 protected:
  void SetUp() override { make(QpType::kRc); }
  void make(QpType t, uint16_t eth_mtu = 9000) {
    port = std::make_unique<TestPort>(MacAddr{{2, 0, 0, 0, 0, 9}}, eth_mtu);
    DeviceConfig cfg;
    cfg.key_seed = 1;
    cfg.gid = net::ipv4_gid(10, 0, 0, 9);  // GID index 0, the path's source
    ctx = must(open_device(*port, cfg));
    attr.ah_attr.dgid = net::ipv4_gid(10, 0, 0, 10);
    pd = must(alloc_pd(ctx.get()));
    cq = must(create_cq(ctx.get(), 16));
    QpInitAttr ia;
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = t;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    qp = must(create_qp(pd, ia));
  }
  StatusCode to(QpState s, uint32_t mask) {
    attr.qp_state = s;
    return modify_qp(qp, attr, kQpState | mask).code();
  }
  QpState state() {
    QpAttr at;
    EXPECT_TRUE(query_qp(qp, &at, nullptr).ok());
    return at.qp_state;
  }
  static constexpr uint32_t kInit = kQpPkeyIndex | kQpPort | kQpAccessFlags;
  static constexpr uint32_t kRtr = kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
  static constexpr uint32_t kRts = kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  void to_rts() {
    ASSERT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
    ASSERT_EQ(to(QpState::kRtr, kRtr), StatusCode::kOk);
    ASSERT_EQ(to(QpState::kRts, kRts), StatusCode::kOk);
  }

  std::unique_ptr<TestPort> port;
  ContextPtr ctx;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
  QpAttr attr;
};

// Modify: RESET->INIT->RTR->RTS->SQD->RTS->ERR->RESET->INIT with exactly the required attributes.
// Expect: every step succeeds and query_qp reports the new state.
TEST_F(QpModify, Table91_ValidPathThroughAllStates) {
  to_rts();
  EXPECT_EQ(state(), QpState::kRts);
  EXPECT_EQ(to(QpState::kSqd, 0), StatusCode::kOk);
  EXPECT_EQ(to(QpState::kSqd, kQpRetryCnt | kQpTimeout), StatusCode::kOk);
  EXPECT_EQ(to(QpState::kRts, kQpMinRnrTimer), StatusCode::kOk);
  EXPECT_EQ(to(QpState::kRts, kQpAccessFlags), StatusCode::kOk);  // RTS->RTS
  EXPECT_EQ(to(QpState::kErr, 0), StatusCode::kOk);
  EXPECT_EQ(state(), QpState::kErr);
  EXPECT_EQ(to(QpState::kReset, 0), StatusCode::kOk);
  EXPECT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
  EXPECT_EQ(state(), QpState::kInit);
}

// Modify: transitions IBA 10.3.1 does not have. Expect: kInvalidQpState, state unchanged.
TEST_F(QpModify, InvalidTransitionsRejected) {
  EXPECT_EQ(to(QpState::kRtr, kRtr), StatusCode::kInvalidQpState);  // RESET->RTR
  EXPECT_EQ(to(QpState::kRts, kRts), StatusCode::kInvalidQpState);  // RESET->RTS
  ASSERT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
  EXPECT_EQ(to(QpState::kRts, kRts), StatusCode::kInvalidQpState);  // INIT->RTS
  EXPECT_EQ(to(QpState::kSqd, 0), StatusCode::kInvalidQpState);    // INIT->SQD
  EXPECT_EQ(to(QpState::kSqe, 0), StatusCode::kInvalidQpState);    // never by modify for RC
  EXPECT_EQ(state(), QpState::kInit);
}

// Modify: each transition missing one required attribute. Expect: kInvalidArgument.
TEST_F(QpModify, Table91_MissingRequiredAttribute) {
  for (uint32_t bit : {kQpPkeyIndex, kQpPort, kQpAccessFlags}) {
    EXPECT_EQ(to(QpState::kInit, kInit & ~bit), StatusCode::kInvalidArgument) << bit;
  }
  ASSERT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
  for (uint32_t bit : {kQpAv, kQpPathMtu, kQpDestQpn, kQpRqPsn, kQpMaxDestRdAtomic, kQpMinRnrTimer}) {
    EXPECT_EQ(to(QpState::kRtr, kRtr & ~bit), StatusCode::kInvalidArgument) << bit;
  }
  ASSERT_EQ(to(QpState::kRtr, kRtr), StatusCode::kOk);
  for (uint32_t bit : {kQpSqPsn, kQpTimeout, kQpRetryCnt, kQpRnrRetry, kQpMaxQpRdAtomic}) {
    EXPECT_EQ(to(QpState::kRts, kRts & ~bit), StatusCode::kInvalidArgument) << bit;
  }
  EXPECT_EQ(state(), QpState::kRtr);
}

// Modify: attributes Table 91 does not allow for the transition. Expect: kInvalidArgument.
TEST_F(QpModify, Table91_AttributeNotAllowed) {
  EXPECT_EQ(to(QpState::kInit, kInit | kQpSqPsn), StatusCode::kInvalidArgument);
  EXPECT_EQ(to(QpState::kInit, kInit | kQpQkey), StatusCode::kInvalidArgument);  // Q_Key is UD only
  ASSERT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
  EXPECT_EQ(to(QpState::kRtr, kRtr | kQpSqPsn), StatusCode::kInvalidArgument);
  EXPECT_EQ(to(QpState::kErr, kQpTimeout), StatusCode::kInvalidArgument);
}

// Modify: out-of-range values. Expect: kInvalidArgument for each.
TEST_F(QpModify, AttributeRanges) {
  ASSERT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
  auto rtr_with = [&](auto&& set) {
    QpAttr saved = attr;
    set(attr);
    const StatusCode c = to(QpState::kRtr, kRtr);
    attr = saved;
    return c;
  };
  EXPECT_EQ(rtr_with([](QpAttr& a) { a.path_mtu = Mtu(0); }), StatusCode::kInvalidArgument);
  EXPECT_EQ(rtr_with([](QpAttr& a) { a.path_mtu = Mtu(6); }), StatusCode::kInvalidArgument);
  EXPECT_EQ(rtr_with([](QpAttr& a) { a.dest_qp_num = 1u << 24; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(rtr_with([](QpAttr& a) { a.rq_psn = 1u << 24; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(rtr_with([](QpAttr& a) { a.min_rnr_timer = 32; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(rtr_with([](QpAttr& a) { a.max_dest_rd_atomic = 17; }), StatusCode::kInvalidArgument);
  ASSERT_EQ(to(QpState::kRtr, kRtr), StatusCode::kOk);
  auto rts_with = [&](auto&& set) {
    QpAttr saved = attr;
    set(attr);
    const StatusCode c = to(QpState::kRts, kRts);
    attr = saved;
    return c;
  };
  EXPECT_EQ(rts_with([](QpAttr& a) { a.retry_cnt = 8; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(rts_with([](QpAttr& a) { a.rnr_retry = 8; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(rts_with([](QpAttr& a) { a.timeout = 32; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(rts_with([](QpAttr& a) { a.sq_psn = 1u << 24; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(rts_with([](QpAttr& a) { a.max_rd_atomic = 17; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(rts_with([](QpAttr& a) {
              a.retry_cnt = 7;
              a.rnr_retry = 7;
              a.timeout = 31;
            }),
            StatusCode::kOk);
}

// Modify: path MTU 2048 on a port with a 1500-byte Ethernet MTU. Expect: refused; 1024 works.
TEST_F(QpModify, PathMtuLimitedByPort) {
  make(QpType::kRc, 1500);
  ASSERT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
  attr.path_mtu = Mtu::k2048;
  EXPECT_EQ(to(QpState::kRtr, kRtr), StatusCode::kInvalidArgument);
  attr.path_mtu = Mtu::k1024;
  EXPECT_EQ(to(QpState::kRtr, kRtr), StatusCode::kOk);
}

// Modify: cur_qp_state that is not the current state. Expect: kInvalidQpState.
TEST_F(QpModify, CurStateMustMatch) {
  attr.cur_qp_state = QpState::kInit;
  EXPECT_EQ(to(QpState::kInit, kInit | kQpCurState), StatusCode::kInvalidQpState);
  attr.cur_qp_state = QpState::kReset;
  EXPECT_EQ(to(QpState::kInit, kInit | kQpCurState), StatusCode::kOk);
}

// Modify: UD transitions. Expect: Q_Key required at INIT, RTR takes no required
// attribute, RTS needs only sq_psn, and SQE->RTS exists for UD.
TEST_F(QpModify, Table91_UdTransitions) {
  make(QpType::kUd);
  EXPECT_EQ(to(QpState::kInit, kQpPkeyIndex | kQpPort), StatusCode::kInvalidArgument);
  EXPECT_EQ(to(QpState::kInit, kQpPkeyIndex | kQpPort | kQpQkey), StatusCode::kOk);
  EXPECT_EQ(to(QpState::kRtr, 0), StatusCode::kOk);
  EXPECT_EQ(to(QpState::kRts, kQpSqPsn | kQpTimeout), StatusCode::kInvalidArgument);
  EXPECT_EQ(to(QpState::kRts, kQpSqPsn), StatusCode::kOk);
  EXPECT_EQ(to(QpState::kRts, kQpQkey), StatusCode::kOk);
}

// Post: send WRs before RTS, receive WRs in RESET. Expect: kInvalidQpState;
// in SQD new WQEs wait until the QP is back in RTS.
TEST_F(QpModify, PostingDependsOnState) {
  SendWr wr;
  RecvWr rw;
  EXPECT_EQ(post_recv(qp, &rw, nullptr).code(), StatusCode::kInvalidQpState);
  ASSERT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
  EXPECT_EQ(post_recv(qp, &rw, nullptr).code(), StatusCode::kOk);
  EXPECT_EQ(post_send(qp, &wr, nullptr).code(), StatusCode::kInvalidQpState);
  ASSERT_EQ(to(QpState::kRtr, kRtr), StatusCode::kOk);
  ASSERT_EQ(to(QpState::kRts, kRts), StatusCode::kOk);
  ASSERT_EQ(to(QpState::kSqd, 0), StatusCode::kOk);
  ASSERT_EQ(post_send(qp, &wr, nullptr).code(), StatusCode::kOk);
  poll(ctx.get(), 1000);
  EXPECT_TRUE(port->sent.empty());
  ASSERT_EQ(to(QpState::kRts, 0), StatusCode::kOk);
  poll(ctx.get(), 2000);
  EXPECT_EQ(port->sent.size(), 1u);
}

// Modify: INIT->RTR with an AV whose sgid_index names an empty GID table
// entry, or an entry of the other IP family than the dgid.
// Expect: kInvalidArgument; with a valid IPv6 entry at index 1, kOk.
TEST_F(QpModify, AvSgidIndexMustNameAnEntryOfTheDgidFamily) {
  ASSERT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
  attr.ah_attr.sgid_index = 1;  // empty
  EXPECT_EQ(to(QpState::kRtr, kRtr), StatusCode::kInvalidArgument);
  attr.ah_attr.sgid_index = 16;  // past the table
  EXPECT_EQ(to(QpState::kRtr, kRtr), StatusCode::kInvalidArgument);
  const Gid v6 = *net::parse_gid("fd00::9");
  ASSERT_TRUE(ctx->net->gids().set(1, net::GidEntry{v6, net::GidType::kRoceV2, net::kNoVlan, port->mac()}).ok());
  attr.ah_attr.sgid_index = 1;  // IPv6 source, IPv4 destination
  EXPECT_EQ(to(QpState::kRtr, kRtr), StatusCode::kInvalidArgument);
  attr.ah_attr.dgid = *net::parse_gid("fd00::10");
  EXPECT_EQ(to(QpState::kRtr, kRtr), StatusCode::kOk);
  AhAttr ah = attr.ah_attr;
  EXPECT_TRUE(create_ah(pd, ah).ok());
  ah.sgid_index = 2;
  EXPECT_EQ(create_ah(pd, ah).status().code(), StatusCode::kInvalidArgument);
}

// Query: the attributes set are reported back, with the capacities allocated.
TEST_F(QpModify, QueryReportsAttributes) {
  attr.retry_cnt = 5;
  attr.timeout = 14;
  attr.sq_psn = 0x123456;
  to_rts();
  QpAttr at;
  QpInitAttr ia;
  ASSERT_TRUE(query_qp(qp, &at, &ia).ok());
  EXPECT_EQ(at.retry_cnt, 5);
  EXPECT_EQ(at.timeout, 14);
  EXPECT_EQ(at.sq_psn, 0x123456u);
  EXPECT_EQ(at.cap.max_send_wr, 4u);
  EXPECT_EQ(ia.qp_type, QpType::kRc);
}

// Modify: uroce's extension (QpAttr::ext, kQpExt) at INIT -> RTR, then elsewhere.
// Expect: accepted at INIT -> RTR of an RC QP and reported back; refused on
// other transitions (Table 91 has no place for it), on UC, with paths outside
// 1..256, and selective repeat on a QP with an SRQ.
TEST_F(QpModify, ExtOnlyAtRcRtrWithinRange) {
  ASSERT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
  attr.ext.paths = 0;
  EXPECT_EQ(to(QpState::kRtr, kRtr | kQpExt), StatusCode::kInvalidArgument);
  attr.ext.paths = 257;
  EXPECT_EQ(to(QpState::kRtr, kRtr | kQpExt), StatusCode::kInvalidArgument);
  attr.ext = QpExt{true, 256, PathMode::kFlowlet, 5000};
  ASSERT_EQ(to(QpState::kRtr, kRtr | kQpExt), StatusCode::kOk);
  QpAttr at;
  ASSERT_TRUE(query_qp(qp, &at, nullptr).ok());
  EXPECT_TRUE(at.ext.selective_repeat);
  EXPECT_EQ(at.ext.paths, 256);
  EXPECT_EQ(at.ext.path_mode, PathMode::kFlowlet);
  EXPECT_EQ(to(QpState::kRts, kRts | kQpExt), StatusCode::kInvalidArgument);

  make(QpType::kUc);
  ASSERT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
  EXPECT_EQ(to(QpState::kRtr, kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpExt), StatusCode::kInvalidArgument);

  make(QpType::kRc);
  Srq* srq = must(create_srq(pd, SrqInitAttr{nullptr, 4, 1, 0}));
  QpInitAttr ia;
  ia.send_cq = ia.recv_cq = cq;
  ia.srq = srq;
  ia.qp_type = QpType::kRc;
  ia.cap.max_send_wr = 4;
  qp = must(create_qp(pd, ia));
  ASSERT_EQ(to(QpState::kInit, kInit), StatusCode::kOk);
  attr.ext = QpExt{true, 1, PathMode::kPacket, 0};
  EXPECT_EQ(to(QpState::kRtr, kRtr | kQpExt), StatusCode::kInvalidArgument);
  attr.ext.selective_repeat = false;
  attr.ext.paths = 8;  // spraying alone needs no receive queue of its own
  EXPECT_EQ(to(QpState::kRtr, kRtr | kQpExt), StatusCode::kOk);
}

}  // namespace
}  // namespace uroce::test
