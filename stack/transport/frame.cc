// Transmit frame construction for the requester and responder.
#include "stack/transport/frame.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <span>

#include <rte_eal.h>
#include <rte_mbuf.h>

#include "stack/mem/mr_table.h"
#include "stack/transport/qp.h"


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

Result<net::GidEntry> path_source(const net::NetStack& net, const AhAttr& av) {
  const net::GidEntry* e = net.gids().at(av.sgid_index);
  if (!e) return Status(StatusCode::kInvalidArgument, "ah_attr.sgid_index names no GID table entry");
  const bool v4_src = e->gid.is_ipv4_mapped();
  if (av.dgid.is_ipv4_mapped() != v4_src) {
    return Status(StatusCode::kInvalidArgument, "ah_attr: dgid and the sgid_index entry are of different IP families");
  }
  return *e;
}

void fill_path(const net::NetStack& net, const QpImpl& qp, const AhAttr& av, const net::GidEntry& src, uint32_t dest_qpn,
               wire::PacketDesc& d) {
  fill_path(net, av, src, dest_qpn,
            qp.qp_type == QpType::kUd ? roce_udp_sport(qp.qp_num, dest_qpn) : qp.udp_sport, d);
}

void fill_path(const net::NetStack& net, const AhAttr& av, const net::GidEntry& src, uint32_t dest_qpn,
               uint16_t udp_sport, wire::PacketDesc& d) {
  d.dst_mac = av.dmac;
  d.src_mac = src.mac;
  if (src.vlan_id != net::kNoVlan) {
    // 802.1Q PCP: the AH's service level where it names one (as mlx5 maps SL
    // to the priority of RoCE frames), else the device's RoCE priority.
    const uint8_t pcp = av.sl ? uint8_t(av.sl & 7) : net.qos().vlan_pcp;
    d.has_vlan = true;
    d.vlan_tci = uint16_t(pcp << 13 | src.vlan_id);
  }
  d.l3 = src.type == net::GidType::kRoceV1 ? wire::L3Kind::kGrh
         : av.dgid.is_ipv4_mapped()        ? wire::L3Kind::kIpv4
                                           : wire::L3Kind::kIpv6;
  d.traffic_class = net.roce_traffic_class(av.traffic_class);
  d.hop_limit = av.hop_limit;
  d.flow_label = av.flow_label;
  d.sgid = src.gid;
  d.dgid = av.dgid;
  d.udp_sport = udp_sport;
  d.pkey = kDefaultPkey;
  d.dest_qp = dest_qpn;
}

void fill_qp_path(const net::NetStack& net, QpImpl& qp, wire::PacketDesc& d) {
  wire::PathTemplate& t = qp.path_template;
  const uint32_t qos = net.qos_generation();
  if (t.len == 0 || qp.path_template_qos != qos) {
    wire::PacketDesc proto;
    fill_path(net, qp, qp.attr.ah_attr, qp.sgid, qp.attr.dest_qp_num, proto);
    wire::make_path_template(proto, t);
    qp.path_template_qos = qos;
  }
  d.path = &t;
  d.l3 = t.l3;
  d.has_vlan = t.has_vlan;
  d.udp_sport = qp.udp_sport;
  d.pkey = kDefaultPkey;
  d.dest_qp = qp.attr.dest_qp_num;
}

uint8_t* begin_frame(Env& env, const wire::PacketDesc& d, rte_mbuf** m) {
  const size_t len = wire::frame_len(d);
  uint8_t* p = env.tx.append(uint16_t(len), m);
  if (!p) {
    // Full: the frame waits for the next turn. Too big: the pool's frames are
    // too small for this MTU, a configuration error counted as an empty pool.
    if (env.tx.error() != net::TxStage::Error::kFull) env.inc(Counter::tx_pool_empty);
    return nullptr;
  }
  return p + wire::write_headers(d, std::span<uint8_t>(p, len));
}

void end_frame(Env& env, const wire::PacketDesc& d, rte_mbuf* m) {
  wire::finish_frame(d, std::span<uint8_t>(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m)));
  if (d.payload_len) env.inc(Counter::tx_copied);
}

namespace {

// Free callback of a zero-copy payload segment: the port is done with the
// region's bytes. Runs on whichever thread frees the mbuf.
void release_region(void* /*addr*/, void* opaque) {
  static_cast<std::atomic<uint32_t>*>(opaque)->fetch_sub(1, std::memory_order_release);
}

bool send_zero_copy(Env& env, const wire::PacketDesc& d, const uint8_t* src, uint32_t key) {
  rte_mbuf* seg[3];
  if (rte_pktmbuf_alloc_bulk(env.tx.pool(), seg, 3) != 0) {
    env.inc(Counter::tx_pool_empty);
    return false;
  }
  rte_mbuf* const hdr = seg[0];
  rte_mbuf* const pay = seg[1];
  rte_mbuf* const tail = seg[2];
  const size_t hlen = wire::header_len(d);
  const size_t tail_len = wire::frame_len(d) - hlen - d.payload_len;  // pad, ICRC, Ethernet padding
  auto* h = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(hdr, uint16_t(hlen)));
  auto* t = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(tail, uint16_t(tail_len)));
  wire::write_headers(d, std::span<uint8_t>(h, hlen));

  // The payload segment: the region's bytes as an external buffer. Its shared
  // info (refcount, free callback) lives in the segment's own data room, which
  // the attach leaves unused and which stays valid until the segment is back
  // in its pool, after the callback has run.
  auto* sh = static_cast<rte_mbuf_ext_shared_info*>(pay->buf_addr);
  sh->free_cb = release_region;
  std::atomic<uint32_t>& refs = env.mrs.tx_refs(key);
  sh->fcb_opaque = &refs;
  rte_mbuf_ext_refcnt_set(sh, 1);
  refs.fetch_add(1, std::memory_order_relaxed);
  void* va = const_cast<uint8_t*>(src);
  // Software ports read it by virtual address; the IOVA is only right where EAL maps IOVA as VA.
  const rte_iova_t iova = rte_eal_iova_mode() == RTE_IOVA_VA ? rte_iova_t(uintptr_t(src)) : RTE_BAD_IOVA;
  rte_pktmbuf_attach_extbuf(pay, va, iova, uint16_t(d.payload_len), sh);
  pay->data_len = uint16_t(d.payload_len);
  pay->pkt_len = d.payload_len;

  std::memset(t, 0, tail_len);  // pad and Ethernet padding are zeros
  const size_t l3_off = sizeof(wire::EthHdr) + (d.has_vlan ? sizeof(wire::VlanTag) : 0);
  const std::span<const uint8_t> rest[2] = {{src, d.payload_len}, {t, d.pad}};
  const uint32_t crc = wire::icrc_compute(d.l3, std::span<const uint8_t>(h + l3_off, hlen - l3_off), rest);
  for (int i = 0; i < 4; ++i) t[d.pad + i] = uint8_t(crc >> (8 * i));  // A17.3.3: little-endian

  hdr->next = pay;
  pay->next = tail;
  hdr->nb_segs = 3;
  hdr->pkt_len = uint32_t(hlen + d.payload_len + tail_len);
  env.tx.push(hdr);
  env.inc(Counter::tx_zero_copy);
  return true;
}

}  // namespace

bool send_frame(Env& env, const wire::PacketDesc& d, const uint8_t* src, uint32_t key) {
  if (env.tx.full()) return false;
  if (env.tx_options.zero_copy && d.payload_len && d.payload_len >= env.tx_options.zero_copy_min_bytes) {
    return send_zero_copy(env, d, src, key);
  }
  rte_mbuf* m = nullptr;
  uint8_t* payload = begin_frame(env, d, &m);
  if (!payload) return false;
  if (d.payload_len) std::memcpy(payload, src, d.payload_len);
  end_frame(env, d, m);
  return true;
}

const Sge* sge_holding(const Sge* sges, uint32_t n, uint32_t off, uint32_t len, uint64_t* at) {
  for (uint32_t i = 0; i < n; ++i) {
    if (off >= sges[i].length) {
      off -= sges[i].length;
      continue;
    }
    if (len > sges[i].length - off) return nullptr;
    *at = sges[i].addr + off;
    return &sges[i];
  }
  return nullptr;
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
