// Transmit frame construction for the requester and responder.
#include "stack/transport/frame.h"

#include <algorithm>
#include <cstring>
#include <span>

#include <rte_mbuf.h>

#include "stack/engine/context.h"

namespace uroce::transport {

uint16_t roce_udp_sport(uint32_t lqpn, uint32_t rqpn) {
  // rdma_calc_flow_label: product of the QPNs folded to 20 bits, then
  // rdma_flow_label_to_udp_sport: fold to 14 bits into 0xC000..0xFFFF.
  uint64_t fl = uint64_t(lqpn) * rqpn;
  fl ^= fl >> 20;
  fl ^= fl >> 40;
  const uint32_t label = uint32_t(fl) & wire::kFlowLabelMask;
  return uint16_t(0xC000 | ((label & 0x3fff) ^ (label >> 14)));
}

void fill_path(const Context& ctx, const QpImpl& qp, const AhAttr& av, uint32_t dest_qpn, wire::PacketDesc& d) {
  d.dst_mac = av.dmac;
  d.src_mac = ctx.mac;
  d.l3 = av.dgid.is_ipv4_mapped() ? wire::L3Kind::kIpv4 : wire::L3Kind::kIpv6;
  d.traffic_class = av.traffic_class;
  d.hop_limit = av.hop_limit;
  d.flow_label = av.flow_label;
  d.sgid = ctx.cfg.gid;
  d.dgid = av.dgid;
  d.udp_sport = qp.qp_type == QpType::kUd ? roce_udp_sport(qp.qp_num, dest_qpn) : qp.udp_sport;
  d.pkey = kDefaultPkey;
  d.dest_qp = dest_qpn;
}

uint8_t* begin_frame(Context& ctx, const wire::PacketDesc& d, rte_mbuf** m) {
  if (ctx.tx_n == kTxBurst) return nullptr;
  rte_mbuf* mb = rte_pktmbuf_alloc(ctx.tx_pool);
  if (!mb) {
    ctx.inc(Counter::tx_pool_empty);
    return nullptr;
  }
  const size_t len = wire::frame_len(d);
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(mb, uint16_t(len)));
  if (!p) {  // the pool's frames are too small for this MTU: a configuration error
    rte_pktmbuf_free(mb);
    ctx.inc(Counter::tx_pool_empty);
    return nullptr;
  }
  *m = mb;
  return p + wire::write_headers(d, std::span<uint8_t>(p, len));
}

void end_frame(Context& ctx, const wire::PacketDesc& d, rte_mbuf* m) {
  wire::finish_frame(d, std::span<uint8_t>(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m)));
  ctx.tx[ctx.tx_n++] = m;
}

namespace {

// Walks the SGE list from byte offset off, calling move(sge_memory, buf_offset, bytes).
template <typename Move>
void walk_sges(const Sge* sges, uint32_t n, uint32_t off, uint32_t len, Move&& move) {
  uint32_t done = 0;
  for (uint32_t i = 0; i < n && done < len; ++i) {
    if (off >= sges[i].length) {
      off -= sges[i].length;
      continue;
    }
    const uint32_t k = std::min(len - done, sges[i].length - off);
    move(reinterpret_cast<uint8_t*>(sges[i].addr) + off, done, k);
    done += k;
    off = 0;
  }
}

}  // namespace

void copy_to_sges(const Sge* sges, uint32_t n, uint32_t off, const uint8_t* src, uint32_t len) {
  walk_sges(sges, n, off, len, [src](uint8_t* mem, uint32_t at, uint32_t k) { std::memcpy(mem, src + at, k); });
}

void copy_from_sges(const Sge* sges, uint32_t n, uint32_t off, uint8_t* dst, uint32_t len) {
  walk_sges(sges, n, off, len, [dst](uint8_t* mem, uint32_t at, uint32_t k) { std::memcpy(dst + at, mem, k); });
}

Mtu max_path_mtu(uint16_t eth_mtu) {
  // Worst-case headers of a data packet: IPv6 40 + UDP 8 + BTH 12 + RETH 16 + ImmDt 4, ICRC 4.
  constexpr uint32_t kOverhead = 40 + 8 + 12 + 16 + 4 + 4;
  Mtu best = Mtu::k256;
  for (Mtu m : {Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096}) {
    if (mtu_bytes(m) + kOverhead <= eth_mtu) best = m;
  }
  return best;
}

}  // namespace uroce::transport
