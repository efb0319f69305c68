// The device context: the packet port, the transmit pool, the object tables,
// the timer wheel and the transmit scheduling state of one engine (one polling
// thread, shared-nothing). Created by open_device on the control path; the
// data path (poll, post_*, poll_cq) only indexes what is here.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <vector>

#include <uroce/packet_io.h>
#include <uroce/verbs.h>

#include "stack/engine/object_table.h"
#include "stack/engine/timer_wheel.h"
#include "stack/mem/mr_table.h"
#include "stack/mem/state_memory.h"
#include "stack/net/net_stack.h"
#include "stack/transport/cq.h"
#include "stack/transport/qp.h"
#include "stack/transport/recv_queue.h"

struct rte_mbuf;

namespace uroce {

namespace cm {
class Agent;  // stack/cm/agent.h: the connection manager on QP1
struct AgentDeleter {
  void operator()(Agent* a) const;
};
}  // namespace cm

// One poll receives as many frames as it may send: with a smaller receive
// burst a responder that answers every frame it reads falls behind a peer
// that sends kTxBurst a poll, its receive ring fills, and every frame it
// reads has gone cold in the cache (engine_bench engine/qps/1000/32: 392 ns
// a WRITE with 32, 267 ns with 64; docs/PERFORMANCE.md "Many QPs").
inline constexpr uint16_t kTxBurst = 64;
inline constexpr uint16_t kRxBurst = kTxBurst;
inline constexpr uint32_t kPktsPerQpTurn = 16;  // requester packets per QP per scheduling turn

struct PdImpl : Pd {
  uint32_t refs = 0;  // MRs, QPs, SRQs and AHs in this PD
};

/// An address handle and the GID table entry it sends from, copied at
/// create_ah (as ib_core pins an AH's sgid_attr): the data path never looks
/// the table up, and a later change of the table does not touch the AH.
struct AhImpl : Ah {
  net::GidEntry sgid;
};

struct Context {
  explicit Context(PacketIo& port) : io(port) {}

  PacketIo& io;
  rte_mempool* tx_pool = nullptr;
  DeviceConfig cfg;
  MacAddr mac;            // cfg.mac, or the port's if cfg.mac is zero
  Mtu max_mtu = Mtu::k1024;  // largest path MTU the port's Ethernet MTU carries; the UD MTU
  Counters counters;
  uint64_t now_ns = 0;    // time of the poll in progress (injected)
  bool tx_zero_copy = false;  // cfg.tx_zero_copy and the port takes chained extbuf mbufs

  mem::MrTable mrs;
  engine::ObjectTable<PdImpl> pds;
  engine::ObjectTable<transport::CqImpl> cqs;
  engine::ObjectTable<transport::SrqImpl> srqs;
  engine::ObjectTable<AhImpl> ahs;
  engine::ObjectTable<transport::QpImpl> qps;  // slot i holds QPN qpn_of_slot(*this, i)

  // Place in an engine group (include/uroce/engine_group.h): QPNs interleave
  // across the group's engines, QPN = kFirstQpn + slot * n_engines + engine_id,
  // so the owner of any QPN is one modulo away. A lone context is engine 0 of 1.
  uint32_t engine_id = 0;
  uint32_t n_engines = 1;

  engine::TimerWheel timers;  // one timer per QP slot
  // Pacing: a QP whose requester the pacer held waits here until the pacer
  // lets its next packet go (stack/transport/pacer.h); firing reschedules it.
  engine::TimerWheel pace_timers;
  std::unique_ptr<net::NetStack> net;  // GID table, ARP/ND, ICMP echo
  std::unique_ptr<cm::Agent, cm::AgentDeleter> cm;  // QP1 and CM ids; made by the first cm_create_id


  // QP slots with something to transmit, served round-robin. ready_flag is per
  // slot (not per QP) so a stale entry of a destroyed QP is never doubled.
  transport::Ring<uint32_t> ready;
  std::pmr::vector<uint8_t> ready_flag{mem::state_memory()};

  // Non-RoCE frames kept for the application (DeviceConfig::app_rx_ring,
  // rx_non_roce): a fixed ring, app_rx_n frames from app_rx_head on.
  std::vector<rte_mbuf*> app_rx;
  uint32_t app_rx_head = 0;
  uint32_t app_rx_n = 0;

  std::array<rte_mbuf*, kTxBurst> tx{};  // frames built, not yet taken by the port
  uint16_t tx_n = 0;

  // Per-QP counters (query_qp_counters): the same names as the device's,
  // counted while the engine works for one QP (its received frames, timer,
  // transmit turn). Slot i belongs to the QP in slot i of generation
  // qp_counters_gen[i]; a new QP in the slot starts from zero.
  std::pmr::vector<QpCounters> qp_counters{mem::state_memory()};
  std::pmr::vector<uint32_t> qp_counters_gen{mem::state_memory()};
  QpCounters* cur_qp_counters = nullptr;  // the QP being served, or null

  void inc(Counter c) {
    counters.inc(c);
    if (cur_qp_counters) cur_qp_counters->inc(c);
  }
};

/// The counter block of qp (zeroed first if the slot has a new QP). Data path.
inline QpCounters& qp_counters_of(Context& ctx, const transport::QpImpl& qp) {
  const uint32_t gen = ctx.qps.generation(qp.index);
  if (ctx.qp_counters_gen[qp.index] != gen) {
    ctx.qp_counters_gen[qp.index] = gen;
    ctx.qp_counters[qp.index] = QpCounters{};
  }
  return ctx.qp_counters[qp.index];
}

/// The device-wide QPN of QP slot `slot` of this engine.
inline uint32_t qpn_of_slot(const Context& ctx, uint32_t slot) {
  return transport::kFirstQpn + slot * ctx.n_engines + ctx.engine_id;
}

/// The QP table slot of qpn on this engine, or UINT32_MAX if no QP of this
/// engine can have it (another engine's QPN, a special QPN below kFirstQpn).
inline uint32_t slot_of_qpn(const Context& ctx, uint32_t qpn) {
  if (qpn < transport::kFirstQpn) return UINT32_MAX;
  const uint32_t q = qpn - transport::kFirstQpn;
  if (ctx.n_engines == 1) return q;
  if (q % ctx.n_engines != ctx.engine_id) return UINT32_MAX;
  return q / ctx.n_engines;
}

/// The QP a BTH DestQP names on this engine, or nullptr (another engine's
/// QPN, a special QPN below kFirstQpn, or an empty slot). Data path.
inline transport::QpImpl* qp_of_qpn(const Context& ctx, uint32_t qpn) {
  const uint32_t slot = slot_of_qpn(ctx, qpn);
  return slot == UINT32_MAX ? nullptr : ctx.qps.at(slot);
}

/// Puts qp on the transmit schedule (no-op if it is already there).
inline void mark_ready(Context& ctx, const transport::QpImpl& qp) {
  if (ctx.ready_flag[qp.index]) return;
  ctx.ready_flag[qp.index] = 1;
  ctx.ready.push() = qp.index;
}

}  // namespace uroce
