// The notification and reaction points of congestion control (cnp.h).
#include "stack/transport/cnp.h"

#include "stack/transport/frame.h"

namespace uroce::transport {

void notify_congestion(Env& env, QpImpl& qp, const CnpParams& p) {
  env.inc(Counter::np_ecn_marked_roce_packets);
  if (!qp.cc.on_ce_marked(env.now_ns)) return env.inc(Counter::np_cnp_suppressed);
  wire::PacketDesc d;
  fill_path(env.net, qp, qp.attr.ah_attr, qp.sgid, qp.attr.dest_qp_num, d);
  d.opcode = wire::kOpcodeCnp;
  d.traffic_class = uint8_t(p.cnp_dscp << 2);  // ECN 00: Not-ECT
  if (d.has_vlan) d.vlan_tci = uint16_t(p.cnp_802p_prio << 13 | (d.vlan_tci & 0x0fff));
  rte_mbuf* m = nullptr;
  if (!begin_frame(env, d, &m)) return env.inc(Counter::np_cnp_no_room);
  end_frame(env, d, m);
  env.inc(Counter::np_cnp_sent);
}

void cnp_rx(Env& env, QpImpl& qp, const wire::PacketDesc& d) {
  if (qp.qp_type != QpType::kUd && d.sgid != qp.attr.ah_attr.dgid) return env.counters.inc(Counter::rx_drop_wrong_src);
  if (env.qp_counters) {
    env.qp_counters->inc(Counter::rcvd_cnp);
    env.qp_counters->inc(Counter::rcvd_pkts);
  }
  env.inc(qp.cc.on_cnp(env.now_ns) ? Counter::rp_cnp_handled : Counter::rp_cnp_ignored);
}

}  // namespace uroce::transport
