// The device context: the packet port, the transmit stage, the object tables,
// the timer wheels and the transmit schedule of one engine (one polling
// thread, shared-nothing). Created by open_device on the control path; the
// data path (poll, post_*, poll_cq) only indexes what is here. The transport
// roles see a narrow part of it, transport::Env, built by env().
#pragma once

#include <cstdint>
#include <memory>
#include <memory_resource>
#include <vector>

#include <uroce/packet_io.h>
#include <uroce/verbs.h>

#include "stack/common/object_table.h"
#include "stack/common/state_memory.h"
#include "stack/common/timer_wheel.h"
#include "stack/mem/mr_table.h"
#include "stack/net/net_stack.h"
#include "stack/net/tx_stage.h"
#include "stack/transport/ah.h"
#include "stack/transport/cq.h"
#include "stack/transport/env.h"
#include "stack/transport/qp.h"
#include "stack/transport/recv_queue.h"
#include "stack/wire/packet.h"

struct rte_mbuf;

namespace uroce {

/// The handler of QP1, the General Services Interface (IBA 13.5): the
/// connection manager (stack/cm) registers one with its device when it starts
/// (Context::qp1), and the engine hands it every frame for DestQP 1 and a
/// call each poll; destroy_qp tells it which QP goes. The device knows no
/// more of the CM than this.
class Qp1Handler {
 public:
  virtual ~Qp1Handler() = default;
  /// A RoCE frame to QP1 that passed the address checks; frame is the whole frame.
  virtual void rx(const wire::PacketDesc& d, const uint8_t* frame) = 0;
  /// The timers due at now_ns and the MADs waiting to go on the transmit stage.
  virtual void poll(uint64_t now_ns) = 0;
  /// qp is being destroyed: no reference to it may outlive this call.
  virtual void qp_destroyed(const Qp* qp) = 0;
};

struct PdImpl : Pd {
  uint32_t refs = 0;  // MRs, QPs, SRQs and AHs in this PD
};

struct Context {
  explicit Context(PacketIo& port) : io(port), tx(port.tx_pool(), net::TxStage::kMaxFrames, &port) {}

  PacketIo& io;
  DeviceConfig cfg;
  MacAddr mac;            // cfg.mac, or the port's if cfg.mac is zero
  Mtu max_mtu = Mtu::k1024;  // largest path MTU the port's Ethernet MTU carries; the UD MTU
  Counters counters;
  uint64_t now_ns = 0;    // time of the poll in progress (injected)

  mem::MrTable mrs;
  ObjectTable<PdImpl> pds;
  ObjectTable<transport::CqImpl> cqs;
  ObjectTable<transport::SrqImpl> srqs;
  ObjectTable<transport::AhImpl> ahs;
  ObjectTable<transport::QpImpl> qps;  // slot i holds QPN qpn_of_slot(*this, i)

  // Place in an engine group (include/uroce/engine_group.h): QPNs interleave
  // across the group's engines, QPN = kFirstQpn + slot * n_engines + engine_id,
  // so the owner of any QPN is one modulo away. A lone context is engine 0 of 1.
  uint32_t engine_id = 0;
  uint32_t n_engines = 1;

  TimerWheel timers;  // one timer per QP slot
  // Pacing: a QP whose requester the pacer held waits here until the pacer
  // lets its next packet go (stack/transport/qp_cc.h); firing reschedules it.
  TimerWheel pace_timers;
  std::unique_ptr<net::NetStack> net;  // GID table, ARP/ND, ICMP echo
  std::unique_ptr<Qp1Handler> qp1;     // the CM's agent, made by the first cm_create_id

  transport::ReadyQueue ready;  // QP slots with something to transmit

  // Non-RoCE frames kept for the application (DeviceConfig::app_rx_ring,
  // rx_non_roce): a fixed ring, app_rx_n frames from app_rx_head on.
  std::vector<rte_mbuf*> app_rx;
  uint32_t app_rx_head = 0;
  uint32_t app_rx_n = 0;

  net::TxStage tx;  // frames built, not yet taken by the port
  transport::TxOptions tx_options;
  transport::AsyncSink async;  // set_async_event_handler

  // Per-QP counters (query_qp_counters): the same names as the device's,
  // counted while the engine works for one QP (its received frames, timer,
  // transmit turn). Slot i belongs to the QP in slot i of generation
  // qp_counters_gen[i]; a new QP in the slot starts from zero.
  std::pmr::vector<QpCounters> qp_counters{state_memory()};
  std::pmr::vector<uint32_t> qp_counters_gen{state_memory()};

  /// The transport roles' view of this device for one unit of work; qc is
  /// the counter block of the QP it is for (qp_counters_of), or null.
  transport::Env env(QpCounters* qc = nullptr) {
    return transport::Env{mrs, *net, tx, ready, timers, pace_timers, counters, qc, now_ns, tx_options, async};
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

}  // namespace uroce
