// Hostile-peer harness: a victim device, an honest peer device and an
// attacker, three ports of one loopback fabric (drivers/loopback: the real
// switch, links and receive rings; the victim's engine takes the attacker's
// frames through rx_burst -> parse -> address checks -> QP lookup ->
// responder / completer exactly as it takes a NIC's). The attacker is a bare
// port without a stack: it builds frames with the wire builder (or by hand)
// and reads the victim's answers from its own receive ring.
//
// Every region the victim registers lives in a GuardedBuf: PROT_NONE pages on
// both sides (an overrun faults) and canary bytes in the same pages just
// outside the region (a small overrun that stays inside the page is detected).
//
// The victim also serves an honest peer on another RC QP; honest_round()
// runs one round of verified WRITE, READ, SEND and FETCH_ADD traffic, so a
// test can show that the attack does not disturb anyone else.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include <gtest/gtest.h>
#include <uroce/verbs.h>
#include <uroce/wr.h>

#include "drivers/loopback/fabric.h"
#include "stack/wire/packet.h"

namespace uroce::hostile {

/// [PROT_NONE page][canary | region | canary][PROT_NONE page]; the region
/// starts kLeadCanary bytes into its first accessible page and the canary
/// runs from its end to the end of its last accessible page (>= 64 bytes).
class GuardedBuf {
 public:
  static constexpr size_t kLeadCanary = 64;
  static constexpr uint8_t kCanary = 0xc5;
  explicit GuardedBuf(size_t len);
  ~GuardedBuf();
  GuardedBuf(const GuardedBuf&) = delete;
  GuardedBuf& operator=(const GuardedBuf&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return len_; }
  uint64_t addr(size_t off = 0) const { return uint64_t(uintptr_t(data_ + off)); }
  /// True if every canary byte around the region still holds kCanary.
  bool canaries_intact() const;
  /// Fills the region with a pattern from seed and keeps a copy for unchanged().
  void fill(uint8_t seed);
  /// True if the region still equals what fill() wrote.
  bool unchanged() const;

 private:
  uint8_t* map_ = nullptr;   // whole mapping, guard pages included
  size_t map_len_ = 0;
  uint8_t* open_ = nullptr;  // first accessible byte
  size_t open_len_ = 0;
  uint8_t* data_ = nullptr;
  size_t len_ = 0;
  std::vector<uint8_t> snapshot_;
};

/// The attacker's view of one frame the victim sent it.
struct Reply {
  wire::PacketDesc d;
  std::vector<uint8_t> payload;
};

inline constexpr MacAddr kVMac{{0x02, 0, 0, 0, 0, 0x0a}};  // victim
inline constexpr MacAddr kHMac{{0x02, 0, 0, 0, 0, 0x0b}};  // honest peer
inline constexpr MacAddr kXMac{{0x02, 0, 0, 0, 0, 0x0c}};  // attacker

/// Brings qp from RESET to RTS as an RC QP connected to dest_qpn at dgid/dmac
/// (path MTU 1024, timeout 16.8 ms, retry_cnt 3, rnr_retry 3, RNR timer 10 us).
void connect_rc(Qp* qp, uint32_t dest_qpn, uint32_t rq_psn, uint32_t sq_psn, const Gid& dgid, MacAddr dmac,
                uint32_t access);
/// An RC/UC/UD QP with 64 send and 64 receive WQEs, 2 SGEs each, every WR signaled.
Qp* make_qp(Pd* pd, Cq* scq, Cq* rcq, QpType type);

/// The NAK code in an ACK-opcode reply (-1 for an ACK or another opcode).
int nak_code(const Reply& r);

class Hostile : public ::testing::Test {
 protected:
  static constexpr uint32_t kAttackerQpn = 0x77;  // the victim's QP believes its peer is this QP
  static constexpr uint32_t kXPsn = 0x1000;        // attacker -> victim request PSNs start here
  static constexpr uint32_t kVPsn = 0x5000;        // victim -> attacker
  static constexpr uint32_t kQkey = 0x22222222;
  static constexpr size_t kMrBytes = 8192;
  static constexpr uint32_t kAllRemote = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

  void SetUp() override;
  void TearDown() override;

  // ---- time
  /// One 1 us step: the fabric delivers, both engines poll.
  void step();
  void run_for(uint64_t ns);

  /// Replaces vx_ (after a class C error left it in ERR) by a new RC QP
  /// connected to the attacker, expecting PSN kXPsn again.
  void fresh_vx();

  // ---- the attacker
  /// A request template from the attacker to the victim's RC QP vx: addresses,
  /// DestQP, the next PSN the victim expects, AckReq set.
  wire::PacketDesc req(uint8_t opcode);
  /// Builds d with payload and sends it from the attacker's port.
  void send(const wire::PacketDesc& d, std::span<const uint8_t> payload = {});
  /// Sends raw bytes (hand-built or corrupted frames).
  void send_raw(std::span<const uint8_t> frame);
  /// Runs for ns and returns every frame the victim sent the attacker.
  std::vector<Reply> replies(uint64_t ns = 200'000);

  // ---- the victim
  uint64_t count(Counter c) const { return query_counters(v_.get()).get(c); }
  QpState state(Qp* qp) const;
  /// Every guarded buffer's canaries intact.
  bool all_canaries_intact() const;

  // ---- the honest peer
  /// One round on hv -> vh: WRITE 2 KB, READ it back, SEND 256 B, FETCH_ADD 1;
  /// true if all completed successfully with the right data. Round k uses
  /// patterns of k; rounds must be run in order 0, 1, 2, ...
  bool honest_round(int k, uint64_t max_ns = 50'000'000);
  /// honest_round with the attacker's `attack` called every step.
  template <typename F>
  bool honest_round_under(int k, F&& attack) {
    attack_hook_ = [&] { attack(); };
    const bool ok = honest_round(k);
    attack_hook_ = nullptr;
    return ok;
  }

  std::unique_ptr<loopback::Fabric> fabric_;
  loopback::Port* vport_ = nullptr;
  loopback::Port* hport_ = nullptr;
  loopback::Port* xport_ = nullptr;
  ContextPtr v_, h_;
  Gid vgid_, hgid_, xgid_;
  Pd* vpd_ = nullptr;
  Pd* vpd2_ = nullptr;  // another PD of the victim
  Pd* hpd_ = nullptr;
  Cq* vcq_ = nullptr;
  Cq* vrcq_ = nullptr;
  Cq* hcq_ = nullptr;
  Cq* hrcq_ = nullptr;
  Qp* vx_ = nullptr;   // victim RC QP "connected" to the attacker
  Qp* vud_ = nullptr;  // victim UD QP
  Qp* vh_ = nullptr;   // victim <-> honest peer
  Qp* hv_ = nullptr;

  // Victim memory, all guarded.
  GuardedBuf rw_{kMrBytes};     // remote write + read + atomic, PD 1
  GuardedBuf ro_{kMrBytes};     // remote read only, PD 1
  GuardedBuf local_{kMrBytes};  // local write only (receive buffers), PD 1
  GuardedBuf pd2_{kMrBytes};    // all remote access, but PD 2
  GuardedBuf vhon_{kMrBytes};   // the honest QP's target, PD 1
  GuardedBuf hbuf_{kMrBytes};   // the honest peer's own buffer
  Mr* rw_mr_ = nullptr;
  Mr* ro_mr_ = nullptr;
  Mr* local_mr_ = nullptr;
  Mr* pd2_mr_ = nullptr;
  Mr* vhon_mr_ = nullptr;
  Mr* hbuf_mr_ = nullptr;

  uint32_t xpsn_ = kXPsn;  // the next PSN the victim expects from the attacker
  uint64_t now_ = 1'000'000;
  std::function<void()> attack_hook_;
  std::vector<Wc> other_wcs_;  // receive completions of QPs other than vh_ seen by honest_round
};

}  // namespace uroce::hostile
