// libFuzzer target: the receive path (stack/engine/engine.cc -> parse ->
// address checks -> QP lookup -> transport responder / completer) of a
// Context with one RC, one UC and one UD QP in a state the input chooses.
//
// Input format (tests/fuzz/make_corpus.py writes seeds in it):
//   byte 0          QP state: (b & 7) % 7 = RESET, INIT, RTR, RTS, SQD, SQE, ERR
//                   (RC has no SQE, IBA 10.3.1: for SQE the RC QP stays in RTS);
//                   bit 3: post send WRs (RC: SEND, WRITE, READ, CMP_SWAP,
//                   FETCH_ADD; UC: SEND, WRITE; UD: SEND) while in RTS, so the
//                   completer has something to match responses against.
//   then records    [flags0][flags1][len lo][len hi][len bytes of frame]
//     flags0 bit 0  fix the IPv4 header checksum and the ICRC
//            bit 1  fix IP/UDP lengths to the frame's length
//            2-3    BTH DestQP := 0 keep, 1 RC, 2 UC, 3 UD
//            4-5    RETH/AtomicETH/IETH rkey := 0 keep, 1 the remote-write MR,
//                   2 the remote-read-only MR, 3 the local-only MR; the VA is
//                   moved into [base - 32, base + len + 32) of it
//            6      address it to us from the peer: dst MAC, src and dst IP,
//                   P_Key, UD Q_Key
//            7      BTH PSN := the PSN the target QP expects (responder ePSN
//                   for requests, oldest unacked PSN for responses) + delta
//     flags1 0-2    PSN delta - 4
//            4-6    advance the virtual clock before this frame's poll by
//                   0, 1 us, 10 us, 100 us, 1 ms, 10 ms, 100 ms or 1 s
// Each frame is injected and poll() runs; then the clock runs on for 3.2 s of
// virtual time (retransmit, RNR and ACK timers fire) and the CQs are drained.
//
// Invariants, checked after each input (a failure aborts):
//  - guard bytes around every MR are unchanged (no write outside an MR);
//  - the remote-read-only MR and the send-source MR are unchanged (no remote
//    write without IBV_ACCESS_REMOTE_WRITE, none into memory only sent from);
//  - every completion's wr_id is one that was posted;
//  - every RoCE frame the stack transmits parses (ICRC verified);
//  - after close_device the port's mempool is full again (no mbuf leak);
//  - ASan/UBSan/LSan: no memory error, undefined behaviour or heap leak.
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <uroce/eal.h>
#include <uroce/packet_io.h>
#include <uroce/verbs.h>

#include "stack/device/context.h"
#include "stack/transport/qp.h"
#include "stack/wire/checksum.h"
#include "stack/wire/icrc.h"
#include "stack/wire/packet.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace uroce;

constexpr char kFuzzTarget[] = "fuzz_rx";

constexpr unsigned kPoolFrames = 1024;
constexpr MacAddr kOurMac{{0x02, 0, 0, 0, 0, 0x01}};
constexpr MacAddr kPeerMac{{0x02, 0, 0, 0, 0, 0x02}};
constexpr uint8_t kOurIp[4] = {10, 0, 0, 1};
constexpr uint8_t kPeerIp[4] = {10, 0, 0, 2};
constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kPeerQpn = 0x123;

// The in-memory port (fuzz_support.h); every frame the stack transmits must be
// one segment and valid RoCE (or not RoCE at all: ARP).
class FuzzPort final : public fuzz::InboxPort {
 public:
  explicit FuzzPort(rte_mempool* pool) : InboxPort(pool, kOurMac, 9000) {}

 private:
  void on_tx(const rte_mbuf& m) override {
    wire::PacketDesc d;
    const auto e = wire::parse({rte_pktmbuf_mtod(&m, const uint8_t*), rte_pktmbuf_data_len(&m)}, d);
    FUZZ_CHECK(m.nb_segs == 1);
    FUZZ_CHECK(e == wire::ParseError::kOk || wire::is_not_roce(e));  // the stack sends valid RoCE
  }
};

FuzzPort* g_port = nullptr;

// Memory: four MRs, each between guard bands.
constexpr size_t kGuard = 256;
constexpr size_t kMrBytes = 4096;
enum MrIdx { kMrRemoteRw, kMrRemoteRo, kMrLocal, kMrSrc, kMrCount };
constexpr size_t mr_off(int i) { return kGuard + size_t(i) * (kMrBytes + kGuard); }
constexpr size_t kArenaBytes = mr_off(kMrCount);
alignas(64) uint8_t g_arena[kArenaBytes];
constexpr uint8_t kGuardByte = 0xa5;

uint8_t pattern(size_t i) { return uint8_t(i * 131 + (i >> 8) * 7 + 3); }

// The arena as each input starts with it, built once; filling and checking
// are then a memcpy and a few memcmps (plain byte loops under coverage
// instrumentation cost more than the receive path itself).
const std::array<uint8_t, kArenaBytes>& pristine_arena() {
  static const auto image = [] {
    std::array<uint8_t, kArenaBytes> a;
    a.fill(kGuardByte);
    for (int m = 0; m < kMrCount; ++m) {
      for (size_t i = 0; i < kMrBytes; ++i) a[mr_off(m) + i] = pattern(i + size_t(m) * kMrBytes);
    }
    return a;
  }();
  return image;
}

void fill_arena() { std::memcpy(g_arena, pristine_arena().data(), kArenaBytes); }

void check_arena() {
  const uint8_t* ref = pristine_arena().data();
  for (int m = 0; m <= kMrCount; ++m) {  // guard before each MR and after the last
    const size_t start = m == 0 ? 0 : mr_off(m - 1) + kMrBytes;
    if (std::memcmp(g_arena + start, ref + start, kGuard) != 0) uroce::fuzz::fail(kFuzzTarget, "a guard byte outside every MR changed");
  }
  for (int m : {kMrRemoteRo, kMrSrc}) {
    if (std::memcmp(g_arena + mr_off(m), ref + mr_off(m), kMrBytes) != 0) {
      uroce::fuzz::fail(kFuzzTarget, m == kMrRemoteRo ? "the remote-read-only MR changed" : "the send-source MR changed");
    }
  }
}

uint64_t va(int mr, size_t off = 0) { return uint64_t(uintptr_t(g_arena + mr_off(mr) + off)); }

struct Device {
  ContextPtr ctx;
  Pd* pd = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Ah* ah = nullptr;
  std::array<Mr*, kMrCount> mr{};
  std::array<Qp*, 3> qp{};  // RC, UC, UD
};

constexpr uint64_t kRecvWrId = 0x1000;
constexpr uint64_t kSendWrId = 0x2000;
constexpr uint32_t kRecvPerQp = 4;
constexpr uint32_t kRecvBytes = 512;

bool known_wr_id(uint64_t id) {
  return (id >= kRecvWrId && id < kRecvWrId + 3 * kRecvPerQp) || (id >= kSendWrId && id < kSendWrId + 16);
}

Status to_state(Qp* qp, QpType type, QpState target) {
  QpAttr at;
  auto step = [&](QpState s, uint32_t mask) {
    at.qp_state = s;
    return modify_qp(qp, at, kQpState | mask);
  };
  if (target == QpState::kReset) return {};
  if (target == QpState::kErr) return step(QpState::kErr, 0);
  const bool ud = type == QpType::kUd;
  at.qp_access_flags = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  at.qkey = kQkey;
  if (Status s = step(QpState::kInit, kQpPkeyIndex | kQpPort | (ud ? kQpQkey : kQpAccessFlags)); !s.ok()) return s;
  if (target == QpState::kInit) return {};
  at.path_mtu = Mtu::k1024;
  at.dest_qp_num = kPeerQpn;
  at.rq_psn = 0x10;
  at.max_dest_rd_atomic = 4;
  at.min_rnr_timer = 1;
  at.ah_attr.dgid = Gid::from_ipv4(kPeerIp);
  at.ah_attr.dmac = kPeerMac;
  const uint32_t rtr = type == QpType::kRc   ? kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
                                                   kQpMinRnrTimer
                       : type == QpType::kUc ? kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn
                                             : 0u;
  if (Status s = step(QpState::kRtr, rtr); !s.ok()) return s;
  if (target == QpState::kRtr) return {};
  at.sq_psn = 0x20;
  at.timeout = 8;  // ~1 ms
  at.retry_cnt = 2;
  at.rnr_retry = 2;
  at.max_rd_atomic = 4;
  const uint32_t rts =
      type == QpType::kRc ? kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic : kQpSqPsn;
  return step(QpState::kRts, rts);
}

void post_sends(Device& dev) {
  uint64_t id = kSendWrId;
  auto post = [&](int qi, WrOpcode op, size_t src_off, uint32_t len) {
    Sge g{op == WrOpcode::kRdmaRead || op == WrOpcode::kAtomicCmpAndSwp || op == WrOpcode::kAtomicFetchAndAdd
              ? va(kMrLocal, 3072 + src_off)
              : va(kMrSrc, src_off),
          len,
          op == WrOpcode::kRdmaRead || op == WrOpcode::kAtomicCmpAndSwp || op == WrOpcode::kAtomicFetchAndAdd
              ? dev.mr[kMrLocal]->lkey
              : dev.mr[kMrSrc]->lkey};
    SendWr wr;
    wr.wr_id = id++;
    wr.sg_list = &g;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = kSendSignaled;
    wr.rdma.remote_addr = 0x7000'0000'0000 + src_off;  // the peer's memory: responses come from the input
    wr.rdma.rkey = 0x1234;
    wr.atomic.remote_addr = wr.rdma.remote_addr;
    wr.atomic.rkey = 0x1234;
    wr.atomic.compare_add = 1;
    wr.atomic.swap = 2;
    wr.ud.ah = dev.ah;
    wr.ud.remote_qpn = kPeerQpn;
    wr.ud.remote_qkey = kQkey;
    static_cast<void>(post_send(dev.qp[qi], &wr, nullptr));
  };
  post(0, WrOpcode::kSend, 0, 100);
  post(0, WrOpcode::kRdmaWrite, 128, 2000);
  post(0, WrOpcode::kRdmaRead, 0, 512);
  post(0, WrOpcode::kAtomicCmpAndSwp, 512, 8);
  post(0, WrOpcode::kAtomicFetchAndAdd, 520, 8);
  post(1, WrOpcode::kSend, 0, 64);
  post(1, WrOpcode::kRdmaWrite, 0, 1100);
  post(2, WrOpcode::kSend, 0, 256);
}

// Opens the device, registers the MRs and brings the QPs to `state`.
bool setup(Device& dev, QpState state, bool sends, uint64_t now) {
  DeviceConfig cfg;
  cfg.mac = kOurMac;
  cfg.gid = Gid::from_ipv4(kOurIp);
  cfg.max_qp = 4;
  cfg.max_mr = 8;
  cfg.max_cq = 4;
  cfg.max_srq = 1;
  cfg.max_pd = 2;
  cfg.max_ah = 2;
  cfg.key_seed = 0x5eed;  // fixed keys: the same input always meets the same MRs
  auto ctx = open_device(*g_port, cfg);
  if (!ctx.ok()) uroce::fuzz::fail(kFuzzTarget, "open_device");
  dev.ctx = std::move(*ctx);
  dev.pd = alloc_pd(dev.ctx.get()).value();
  dev.scq = create_cq(dev.ctx.get(), 64).value();
  dev.rcq = create_cq(dev.ctx.get(), 64).value();
  const uint32_t access[kMrCount] = {
      kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic,
      kAccessRemoteRead,
      kAccessLocalWrite,
      0,
  };
  for (int m = 0; m < kMrCount; ++m) dev.mr[m] = reg_mr(dev.pd, g_arena + mr_off(m), kMrBytes, access[m]).value();
  AhAttr ah;
  ah.dgid = Gid::from_ipv4(kPeerIp);
  ah.dmac = kPeerMac;
  dev.ah = create_ah(dev.pd, ah).value();
  const QpType types[3] = {QpType::kRc, QpType::kUc, QpType::kUd};
  for (int i = 0; i < 3; ++i) {
    QpInitAttr ia;
    ia.send_cq = dev.scq;
    ia.recv_cq = dev.rcq;
    ia.qp_type = types[i];
    ia.sq_sig_all = true;
    ia.cap = QpCap{16, 8, 2, 2, 64};
    dev.qp[i] = create_qp(dev.pd, ia).value();
  }
  const bool sqe = state == QpState::kSqe;
  for (int i = 0; i < 3; ++i) {
    const QpState s = sqe || state == QpState::kSqd ? QpState::kRts : state;
    if (!to_state(dev.qp[i], types[i], s).ok()) uroce::fuzz::fail(kFuzzTarget, "modify_qp on the way to the chosen state");
    if (s != QpState::kReset) {
      for (uint32_t r = 0; r < kRecvPerQp; ++r) {
        const uint32_t slot = uint32_t(i) * kRecvPerQp + r;  // 12 x 256 bytes of the local MR
        Sge g{va(kMrLocal, slot * 256), r == 0 ? kRecvBytes / 2 : kRecvBytes / 2 - 8, dev.mr[kMrLocal]->lkey};
        RecvWr wr;
        wr.wr_id = kRecvWrId + slot;
        wr.sg_list = &g;
        wr.num_sge = 1;
        static_cast<void>(post_recv(dev.qp[i], &wr, nullptr));
      }
    }
  }
  if (sends && (state == QpState::kRts || state == QpState::kSqd || sqe)) {
    post_sends(dev);
    poll(dev.ctx.get(), now);  // the requests go out; responses are the input's business
  }
  for (int i = 0; i < 3; ++i) {
    if (state == QpState::kSqd) {
      QpAttr at;
      at.qp_state = QpState::kSqd;
      if (!modify_qp(dev.qp[i], at, kQpState).ok()) uroce::fuzz::fail(kFuzzTarget, "modify_qp to SQD");
    } else if (sqe && types[i] != QpType::kRc) {
      transport::Env env = dev.ctx->env();
      transport::qp_to_sqe(env, transport::impl(dev.qp[i]));  // as a UC/UD send error does
    }
  }
  return true;
}

void put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (24 - 8 * i));
}
uint32_t get32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }
uint64_t get64(const uint8_t* p) { return uint64_t(get32(p)) << 32 | get32(p + 4); }
void put64(uint8_t* p, uint64_t v) {
  put32(p, uint32_t(v >> 32));
  put32(p + 4, uint32_t(v));
}

// Applies the fix-ups flags0/flags1 ask for to f[0, n), in place.
void fix_up(const Device& dev, uint8_t* f, size_t n, uint8_t flags0, uint8_t flags1) {
  if (n < sizeof(wire::EthHdr)) return;
  size_t l3 = 12;
  uint16_t et = uint16_t(f[l3] << 8 | f[l3 + 1]);
  l3 += 2;
  if (et == wire::kEtherTypeVlan && n >= l3 + 4) {
    et = uint16_t(f[l3 + 2] << 8 | f[l3 + 3]);
    l3 += 4;
  }
  wire::L3Kind kind;
  size_t bth;
  if (et == wire::kEtherTypeIpv4 && n >= l3 + 28 && f[l3] == 0x45) {
    kind = wire::L3Kind::kIpv4;
    bth = l3 + 28;
  } else if ((et == wire::kEtherTypeIpv6 || et == wire::kEtherTypeRoceV1) && n >= l3 + 40) {
    kind = et == wire::kEtherTypeIpv6 ? wire::L3Kind::kIpv6 : wire::L3Kind::kGrh;
    bth = l3 + 40 + (kind == wire::L3Kind::kIpv6 ? 8 : 0);
  } else {
    return;
  }
  if (flags0 & 0x02) {  // lengths
    if (kind == wire::L3Kind::kIpv4) put16(f + l3 + 2, uint16_t(n - l3));
    else put16(f + l3 + 4, uint16_t(n - l3 - 40));
    if (kind != wire::L3Kind::kGrh) put16(f + bth - 4, uint16_t(n - (bth - 8)));
  }
  if (flags0 & 0x40) {  // address it to us, from the peer the connected QPs talk to
    std::memcpy(f, kOurMac.b, 6);
    if (kind == wire::L3Kind::kIpv4) {
      std::memcpy(f + l3 + 12, kPeerIp, 4);
      std::memcpy(f + l3 + 16, kOurIp, 4);
    } else {
      std::memcpy(f + l3 + 8, Gid::from_ipv4(kPeerIp).raw, 16);
      std::memcpy(f + l3 + 24, Gid::from_ipv4(kOurIp).raw, 16);
    }
  }
  if (n < bth + sizeof(wire::Bth)) return;
  const wire::OpcodeInfo& info = wire::kOpcodes[f[bth]];
  const bool valid = info.flags & wire::kValid;
  const size_t hend = bth + info.hdr_len;
  transport::QpImpl* target = nullptr;
  if (const uint8_t sel = (flags0 >> 2) & 3) {
    target = &transport::impl(dev.qp[sel - 1]);
    f[bth + 5] = uint8_t(target->qp_num >> 16);
    f[bth + 6] = uint8_t(target->qp_num >> 8);
    f[bth + 7] = uint8_t(target->qp_num);
  }
  if (flags0 & 0x40) {
    put16(f + bth + 2, 0xffff);
    if (valid && info.has(wire::Hdr::kDeth) && n >= hend) put32(f + bth + info.off[size_t(wire::Hdr::kDeth)], kQkey);
  }
  if ((flags0 & 0x80) && target) {
    const uint32_t base = (info.flags & wire::kReq) ? target->resp.epsn : target->comp.comp_psn;
    const uint32_t psn = (base + (flags1 & 7) - 4) & wire::kBthPsnMask;
    f[bth + 9] = uint8_t(psn >> 16);
    f[bth + 10] = uint8_t(psn >> 8);
    f[bth + 11] = uint8_t(psn);
  }
  if (const uint8_t sel = (flags0 >> 4) & 3; sel && valid && n >= hend) {
    static constexpr int kMrOf[4] = {0, kMrRemoteRw, kMrRemoteRo, kMrLocal};
    const Mr* mr = dev.mr[kMrOf[sel]];
    auto move_va = [&](uint8_t* p) {  // p: VA (8 bytes) then R_Key
      const uint64_t v = va(kMrOf[sel]) + get64(p) % (kMrBytes + 64) - 32;
      put64(p, v);
      put32(p + 8, mr->rkey);
    };
    if (info.has(wire::Hdr::kReth)) move_va(f + bth + info.off[size_t(wire::Hdr::kReth)]);
    if (info.has(wire::Hdr::kAtomicEth)) move_va(f + bth + info.off[size_t(wire::Hdr::kAtomicEth)]);
    if (info.has(wire::Hdr::kIeth)) put32(f + bth + info.off[size_t(wire::Hdr::kIeth)], mr->rkey);
  }
  if (flags0 & 0x01) {  // checksums
    if (kind == wire::L3Kind::kIpv4) {
      put16(f + l3 + 10, 0);
      put16(f + l3 + 10, wire::csum_finish(wire::csum_partial({f + l3, sizeof(wire::Ipv4Hdr)})));
    }
    const size_t end = kind == wire::L3Kind::kIpv4 ? l3 + (size_t(f[l3 + 2]) << 8 | f[l3 + 3])
                                                   : l3 + 40 + (size_t(f[l3 + 4]) << 8 | f[l3 + 5]);
    if (end > n || end < bth + wire::kIcrcBytes) return;
    const uint32_t crc = wire::icrc_compute(kind, {f + l3, end - wire::kIcrcBytes - l3});
    for (int i = 0; i < 4; ++i) f[end - 4 + i] = uint8_t(crc >> (8 * i));
  }
}

constexpr uint64_t kAdvanceNs[8] = {0, 1'000, 10'000, 100'000, 1'000'000, 10'000'000, 100'000'000, 1'000'000'000};

void drain_cq(Cq* cq) {
  Wc wc[16];
  for (int n; (n = poll_cq(cq, 16, wc)) > 0;) {
    for (int i = 0; i < n; ++i) FUZZ_CHECK(known_wr_id(wc[i].wr_id));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!init_eal_unpinned().ok()) uroce::fuzz::fail(kFuzzTarget, "init_eal");  // run.sh runs fuzzers side by side
  auto pool = create_frame_pool("fuzz_rx", kPoolFrames);
  if (!pool.ok()) uroce::fuzz::fail(kFuzzTarget, "create_frame_pool");
  g_port = new FuzzPort(*pool);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr QpState kStates[7] = {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts,
                                         QpState::kSqd,   QpState::kSqe,  QpState::kErr};
  const QpState state = kStates[(data[0] & 7) % 7];
  uint64_t now = 1'000'000'000;
  fill_arena();
  {
    Device dev;
    setup(dev, state, data[0] & 0x08, now);
    static uint8_t frame[kFrameRoomBytes];
    size_t off = 1;
    while (off + 4 <= size) {
      const uint8_t flags0 = data[off], flags1 = data[off + 1];
      size_t len = size_t(data[off + 2]) | size_t(data[off + 3]) << 8;
      off += 4;
      len = std::min({len, size - off, size_t(kFrameRoomBytes)});
      std::memcpy(frame, data + off, len);
      off += len;
      fix_up(dev, frame, len, flags0, flags1);
      g_port->inject({frame, len});
      now += kAdvanceNs[(flags1 >> 4) & 7];
      poll(dev.ctx.get(), now);
      drain_cq(dev.scq);
      drain_cq(dev.rcq);
    }
    // 3.2 s of virtual time: every retransmit/RNR timer fires until it gives
    // up. Few big steps: a step costs a walk of the whole timer wheel.
    for (int i = 0; i < 8; ++i) {
      now += 400'000'000;
      poll(dev.ctx.get(), now);
    }
    drain_cq(dev.scq);
    drain_cq(dev.rcq);
    check_arena();
    g_port->clear();
  }  // close_device destroys everything
  FUZZ_CHECK(rte_mempool_avail_count(g_port->pool()) == kPoolFrames);
  return 0;
}
