// Opening and closing a device, its counters and its asynchronous event handler.
#include "stack/device/context.h"

#include <algorithm>

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include "stack/device/telemetry.h"
#include "stack/transport/frame.h"

namespace uroce {

Result<ContextPtr> open_device(PacketIo& io, const DeviceConfig& cfg) {
  if (cfg.max_qp == 0 || cfg.max_qp > wire::kBthQpnMask - transport::kFirstQpn || cfg.max_mr == 0 ||
      cfg.max_cq == 0 || cfg.max_pd == 0) {
    return Status(StatusCode::kInvalidArgument, "device limits out of range");
  }
  if (Status s = transport::validate(cfg.cc); !s.ok()) return s;
  rte_mempool* pool = io.tx_pool();
  if (!pool) return Status(StatusCode::kInvalidArgument, "port has no transmit pool");
  ContextPtr ctx(new Context(io));
  ctx->cfg = cfg;
  ctx->mac = cfg.mac == MacAddr{} ? io.mac() : cfg.mac;
  ctx->max_mtu = transport::max_path_mtu(io.caps().mtu);
  ctx->tx_options = {.zero_copy = cfg.tx_zero_copy && io.caps().tx_multiseg,
                     .zero_copy_min_bytes = cfg.tx_zero_copy_min_bytes};
  ctx->mrs.init(cfg.max_mr, cfg.key_seed ? cfg.key_seed : rte_rdtsc());
  ctx->pds.init(cfg.max_pd);
  ctx->cqs.init(cfg.max_cq);
  ctx->srqs.init(cfg.max_srq);
  ctx->ahs.init(cfg.max_ah);
  ctx->qps.init(cfg.max_qp);
  ctx->timers.init(cfg.max_qp, 0);
  ctx->pace_timers.init(cfg.max_qp, 0);
  ctx->ready.init(cfg.max_qp);
  ctx->qp_counters.assign(cfg.max_qp, QpCounters{});
  ctx->qp_counters_gen.assign(cfg.max_qp, 0);
  ctx->app_rx.assign(cfg.app_rx_ring, nullptr);
  net::NetConfig nc;
  nc.qos.dscp = cfg.dscp;
  nc.qos.force_dscp = cfg.force_dscp;
  nc.qos.ecn = cfg.ecn ? net::Ecn::kEct0 : net::Ecn::kNotEct;
  nc.qos.vlan_pcp = cfg.vlan_pcp;
  auto net = net::NetStack::create(nc);
  if (!net.ok()) return net.status();
  ctx->net = std::move(net.value());
  if (cfg.gid != Gid{}) {
    const Status st = ctx->net->gids().set(0, net::GidEntry{cfg.gid, net::GidType::kRoceV2, net::kNoVlan, ctx->mac});
    if (!st.ok()) return st;
  }
  telemetry_add(ctx.get());  // dpdk-telemetry.py / uroce stat: /uroce/*
  return ctx;
}

void close_device(Context* ctx) {
  if (!ctx) return;
  telemetry_remove(ctx);
  for (uint32_t i = 0; i < ctx->app_rx_n; ++i) {
    rte_pktmbuf_free(ctx->app_rx[(ctx->app_rx_head + i) % ctx->app_rx.size()]);
  }
  delete ctx;
}

const Counters& query_counters(const Context* ctx) { return ctx->counters; }

void set_async_event_handler(Context* ctx, AsyncEventFn fn, void* arg) { ctx->async = {fn, fn ? arg : nullptr}; }

Counters query_qp_counters(Qp* qp) {
  const QpCounters& q = qp_counters_of(*qp->context, transport::impl(qp));
  Counters c;
  std::copy(q.v.begin(), q.v.end(), c.v.begin());
  return c;
}

}  // namespace uroce
