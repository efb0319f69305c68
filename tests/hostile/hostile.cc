// Hostile-peer harness: guarded memory, the three-port fabric, the attacker's
// frame builder and the honest peer's verified traffic.
#include "tests/hostile/hostile.h"

#include <rte_mbuf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <uroce/eal.h>

#include "stack/wire/aeth.h"

namespace uroce::hostile {

namespace {

class EalEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_TRUE(init_eal().ok()); }
};
[[maybe_unused]] const auto* const kEal = ::testing::AddGlobalTestEnvironment(new EalEnvironment);

constexpr uint8_t kVIp[4] = {10, 7, 0, 10};
constexpr uint8_t kHIp[4] = {10, 7, 0, 11};
constexpr uint8_t kXIp[4] = {10, 7, 0, 12};
constexpr size_t kHonestWrite = 2048;
constexpr size_t kHonestSend = 256;
constexpr size_t kHonestAtomicOff = 8000;  // 8-aligned inside vhon_

uint8_t pattern(size_t i, uint8_t seed) { return uint8_t(seed * 29 + i * 7 + (i >> 8) * 3 + 1); }

template <typename T>
T must(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : T{};
}

}  // namespace

// ---------------------------------------------------------------- GuardedBuf

GuardedBuf::GuardedBuf(size_t len) : len_(len) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  open_len_ = (kLeadCanary + len + 64 + page - 1) / page * page;
  map_len_ = open_len_ + 2 * page;
  void* p = mmap(nullptr, map_len_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  map_ = static_cast<uint8_t*>(p);
  open_ = map_ + page;
  if (mprotect(open_, open_len_, PROT_READ | PROT_WRITE) != 0) throw std::bad_alloc();
  std::memset(open_, kCanary, open_len_);
  data_ = open_ + kLeadCanary;
  std::memset(data_, 0, len_);
}

GuardedBuf::~GuardedBuf() { munmap(map_, map_len_); }

bool GuardedBuf::canaries_intact() const {
  for (const uint8_t* p = open_; p < data_; ++p) {
    if (*p != kCanary) return false;
  }
  for (const uint8_t* p = data_ + len_; p < open_ + open_len_; ++p) {
    if (*p != kCanary) return false;
  }
  return true;
}

void GuardedBuf::fill(uint8_t seed) {
  for (size_t i = 0; i < len_; ++i) data_[i] = pattern(i, seed);
  snapshot_.assign(data_, data_ + len_);
}

bool GuardedBuf::unchanged() const { return std::memcmp(snapshot_.data(), data_, len_) == 0; }

// ---------------------------------------------------------------- fixture

void connect_rc(Qp* qp, uint32_t dest_qpn, uint32_t rq_psn, uint32_t sq_psn, const Gid& dgid, MacAddr dmac,
                uint32_t access) {
  QpAttr at;
  at.qp_state = QpState::kInit;
  at.qp_access_flags = access;
  ASSERT_TRUE(modify_qp(qp, at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags).ok());
  at.qp_state = QpState::kRtr;
  at.path_mtu = Mtu::k1024;
  at.dest_qp_num = dest_qpn;
  at.rq_psn = rq_psn;
  at.max_dest_rd_atomic = 4;
  at.min_rnr_timer = 1;
  at.ah_attr.dgid = dgid;
  at.ah_attr.dmac = dmac;
  ASSERT_TRUE(modify_qp(qp, at,
                        kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer)
                  .ok());
  at.qp_state = QpState::kRts;
  at.sq_psn = sq_psn;
  at.timeout = 12;  // 16.8 ms
  at.retry_cnt = 3;
  at.rnr_retry = 3;
  at.max_rd_atomic = 4;
  ASSERT_TRUE(
      modify_qp(qp, at, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic).ok());
}

Qp* make_qp(Pd* pd, Cq* scq, Cq* rcq, QpType type) {
  QpInitAttr ia;
  ia.send_cq = scq;
  ia.recv_cq = rcq;
  ia.qp_type = type;
  ia.sq_sig_all = true;
  ia.cap.max_send_wr = 64;
  ia.cap.max_recv_wr = 64;
  ia.cap.max_send_sge = 2;
  ia.cap.max_recv_sge = 2;
  return must(create_qp(pd, ia));
}

void Hostile::SetUp() {
  vgid_ = Gid::from_ipv4(kVIp);
  hgid_ = Gid::from_ipv4(kHIp);
  xgid_ = Gid::from_ipv4(kXIp);
  auto fab = loopback::Fabric::create();
  ASSERT_TRUE(fab.ok()) << fab.status().message();
  fabric_ = std::move(*fab);
  loopback::PortConfig pc;
  pc.rx_ring_size = 4096;
  vport_ = must(fabric_->add_port(kVMac, pc));
  hport_ = must(fabric_->add_port(kHMac, pc));
  xport_ = must(fabric_->add_port(kXMac, pc));
  ASSERT_TRUE(vport_ && hport_ && xport_);

  DeviceConfig vc;
  vc.gid = vgid_;
  vc.max_qp = 16;
  auto v = open_device(*vport_, vc);
  ASSERT_TRUE(v.ok()) << v.status().message();
  v_ = std::move(*v);
  DeviceConfig hc;
  hc.gid = hgid_;
  hc.max_qp = 16;
  auto h = open_device(*hport_, hc);
  ASSERT_TRUE(h.ok()) << h.status().message();
  h_ = std::move(*h);

  vpd_ = must(alloc_pd(v_.get()));
  vpd2_ = must(alloc_pd(v_.get()));
  hpd_ = must(alloc_pd(h_.get()));
  Pd* hpd = hpd_;
  vcq_ = must(create_cq(v_.get(), 256));
  vrcq_ = must(create_cq(v_.get(), 256));
  hcq_ = must(create_cq(h_.get(), 256));
  hrcq_ = must(create_cq(h_.get(), 256));

  rw_mr_ = must(reg_mr(vpd_, rw_.data(), rw_.size(), kAllRemote));
  ro_mr_ = must(reg_mr(vpd_, ro_.data(), ro_.size(), kAccessRemoteRead));
  local_mr_ = must(reg_mr(vpd_, local_.data(), local_.size(), kAccessLocalWrite));
  pd2_mr_ = must(reg_mr(vpd2_, pd2_.data(), pd2_.size(), kAllRemote));
  vhon_mr_ = must(reg_mr(vpd_, vhon_.data(), vhon_.size(), kAllRemote));
  hbuf_mr_ = must(reg_mr(hpd, hbuf_.data(), hbuf_.size(), kAllRemote));
  ASSERT_TRUE(rw_mr_ && ro_mr_ && local_mr_ && pd2_mr_ && vhon_mr_ && hbuf_mr_);
  rw_.fill(1);
  ro_.fill(2);
  local_.fill(3);
  pd2_.fill(4);

  vx_ = make_qp(vpd_, vcq_, vrcq_, QpType::kRc);
  vh_ = make_qp(vpd_, vcq_, vrcq_, QpType::kRc);
  hv_ = make_qp(hpd, hcq_, hrcq_, QpType::kRc);
  vud_ = make_qp(vpd_, vcq_, vrcq_, QpType::kUd);
  ASSERT_TRUE(vx_ && vh_ && hv_ && vud_);
  connect_rc(vx_, kAttackerQpn, kXPsn, kVPsn, xgid_, kXMac, kAllRemote);
  connect_rc(vh_, hv_->qp_num, 0x300, 0x400, hgid_, kHMac, kAllRemote);
  connect_rc(hv_, vh_->qp_num, 0x400, 0x300, vgid_, kVMac, kAllRemote);
  QpAttr ud;
  ud.qp_state = QpState::kInit;
  ud.qkey = kQkey;
  ASSERT_TRUE(modify_qp(vud_, ud, kQpState | kQpPkeyIndex | kQpPort | kQpQkey).ok());
  ud.qp_state = QpState::kRtr;
  ASSERT_TRUE(modify_qp(vud_, ud, kQpState).ok());
  ud.qp_state = QpState::kRts;
  ud.sq_psn = 1;
  ASSERT_TRUE(modify_qp(vud_, ud, kQpState | kQpSqPsn).ok());
}

void Hostile::fresh_vx() {
  ASSERT_TRUE(destroy_qp(vx_).ok());
  vx_ = make_qp(vpd_, vcq_, vrcq_, QpType::kRc);
  ASSERT_NE(vx_, nullptr);
  connect_rc(vx_, kAttackerQpn, kXPsn, kVPsn, xgid_, kXMac, kAllRemote);
  xpsn_ = kXPsn;
}

void Hostile::TearDown() {
  // No byte outside any registered region changed, whatever the test did.
  EXPECT_TRUE(all_canaries_intact());
  v_.reset();
  h_.reset();
  fabric_.reset();
}

bool Hostile::all_canaries_intact() const {
  for (const GuardedBuf* g : {&rw_, &ro_, &local_, &pd2_, &vhon_, &hbuf_}) {
    if (!g->canaries_intact()) return false;
  }
  return true;
}

void Hostile::step() {
  if (attack_hook_) attack_hook_();
  fabric_->advance(now_);
  poll(v_.get(), now_);
  poll(h_.get(), now_);
  now_ += 1000;
}

void Hostile::run_for(uint64_t ns) {
  for (uint64_t end = now_ + ns; now_ < end;) step();
}

QpState Hostile::state(Qp* qp) const {
  QpAttr at;
  EXPECT_TRUE(query_qp(qp, &at, nullptr).ok());
  return at.qp_state;
}

// ---------------------------------------------------------------- attacker

wire::PacketDesc Hostile::req(uint8_t opcode) {
  wire::PacketDesc d;
  d.dst_mac = kVMac;
  d.src_mac = kXMac;
  d.sgid = xgid_;
  d.dgid = vgid_;
  d.udp_sport = 0xc000;
  d.opcode = opcode;
  d.dest_qp = vx_->qp_num;
  d.psn = xpsn_;
  d.ack_req = true;
  return d;
}

void Hostile::send(const wire::PacketDesc& d, std::span<const uint8_t> payload) {
  wire::PacketDesc b = d;
  b.payload_len = uint32_t(payload.size());
  b.pad = wire::pad_for(b.payload_len);
  std::vector<uint8_t> f(wire::frame_len(b));
  ASSERT_GT(wire::build(b, payload, f), 0u);
  send_raw(f);
}

void Hostile::send_raw(std::span<const uint8_t> frame) {
  rte_mbuf* m = rte_pktmbuf_alloc(xport_->tx_pool());
  ASSERT_NE(m, nullptr);
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(frame.size())));
  ASSERT_NE(p, nullptr);
  std::memcpy(p, frame.data(), frame.size());
  fabric_->advance(now_);
  ASSERT_EQ(xport_->tx_burst(&m, 1), 1u);
}

std::vector<Reply> Hostile::replies(uint64_t ns) {
  std::vector<Reply> out;
  for (uint64_t end = now_ + ns; now_ < end;) {
    step();
    rte_mbuf* m[32];
    const uint16_t n = xport_->rx_burst(m, 32);
    for (uint16_t i = 0; i < n; ++i) {
      const auto* f = rte_pktmbuf_mtod(m[i], const uint8_t*);
      Reply r;
      if (wire::parse({f, rte_pktmbuf_data_len(m[i])}, r.d) == wire::ParseError::kOk) {
        r.payload.assign(f + r.d.payload_off, f + r.d.payload_off + r.d.payload_len);
        out.push_back(std::move(r));
      }
      rte_pktmbuf_free(m[i]);
    }
  }
  return out;
}

int nak_code(const Reply& r) {
  if (r.d.opcode != wire::kRcAcknowledge) return -1;
  if (wire::aeth_type(r.d.aeth_syndrome) != wire::AethType::kNak) return -1;
  return wire::aeth_value(r.d.aeth_syndrome);
}

// ---------------------------------------------------------------- honest peer

bool Hostile::honest_round(int k, uint64_t max_ns) {
  const uint8_t seed = uint8_t(k + 100);
  for (size_t i = 0; i < kHonestWrite; ++i) hbuf_.data()[i] = pattern(i, seed);
  for (size_t i = 0; i < kHonestSend; ++i) hbuf_.data()[4096 + i] = pattern(i, uint8_t(seed + 1));
  std::memset(hbuf_.data() + 2048, 0, kHonestWrite);
  if (k == 0) std::memset(vhon_.data() + kHonestAtomicOff, 0, 8);

  Sge rs{vhon_.addr(4096), uint32_t(kHonestSend), vhon_mr_->lkey};
  RecvWr rwr;
  rwr.wr_id = 1000 + uint64_t(k);
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  if (!post_recv(vh_, &rwr, nullptr).ok()) return false;

  Sge s_write{hbuf_.addr(0), uint32_t(kHonestWrite), hbuf_mr_->lkey};
  Sge s_read{hbuf_.addr(2048), uint32_t(kHonestWrite), hbuf_mr_->lkey};
  Sge s_send{hbuf_.addr(4096), uint32_t(kHonestSend), hbuf_mr_->lkey};
  Sge s_atomic{hbuf_.addr(6000), 8, hbuf_mr_->lkey};
  const uint64_t id = uint64_t(k) * 10;
  SendWr w[4] = {write_wr(id + 0, &s_write, vhon_.addr(0), vhon_mr_->rkey).signaled(),
                 read_wr(id + 1, &s_read, vhon_.addr(0), vhon_mr_->rkey).signaled(),
                 send_wr(id + 2, &s_send).signaled(),
                 fetch_add_wr(id + 3, &s_atomic, vhon_.addr(kHonestAtomicOff), vhon_mr_->rkey, 1).signaled()};
  for (int i = 0; i < 3; ++i) w[i].next = &w[i + 1];
  if (!post_send(hv_, w, nullptr).ok()) return false;

  int send_done = 0;
  bool recv_done = false;
  bool ok = true;
  for (uint64_t end = now_ + max_ns; now_ < end && (send_done < 4 || !recv_done);) {
    step();
    Wc wc;
    while (poll_cq(hcq_, 1, &wc) == 1) {
      ++send_done;
      ok &= wc.status == WcStatus::kSuccess && wc.wr_id == uint64_t(k) * 10 + uint64_t(send_done - 1);
    }
    while (poll_cq(vrcq_, 1, &wc) == 1) {
      if (wc.qp_num != vh_->qp_num) {  // the attacked QPs' completions, for the test to look at
        other_wcs_.push_back(wc);
        continue;
      }
      recv_done = true;
      ok &= wc.status == WcStatus::kSuccess && wc.wr_id == 1000 + uint64_t(k) && wc.byte_len == kHonestSend;
    }
  }
  if (send_done < 4 || !recv_done || !ok) return false;
  // The READ brought back what the WRITE put there; the SEND landed; the
  // counter went up by one per round.
  if (std::memcmp(hbuf_.data(), hbuf_.data() + 2048, kHonestWrite) != 0) return false;
  if (std::memcmp(vhon_.data(), hbuf_.data(), kHonestWrite) != 0) return false;
  if (std::memcmp(vhon_.data() + 4096, hbuf_.data() + 4096, kHonestSend) != 0) return false;
  uint64_t orig = 0;
  std::memcpy(&orig, hbuf_.data() + 6000, 8);
  return orig == uint64_t(k);
}

}  // namespace uroce::hostile
