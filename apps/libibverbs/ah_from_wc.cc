// An address vector back to the sender of a UD receive (ibv_init_ah_from_wc,
// ibv_create_ah_from_wc), read from the 40 bytes at the start of the receive
// buffer (IBA 11.4.1.2). uroce's responder fills them as rxe does: the IPv6
// header (RoCEv2) or the IB GRH (RoCEv1) whole, an IPv4 header (RoCEv2) in
// the last 20 bytes. Which one it is shows in the bytes themselves.
#include <endian.h>

#include <cerrno>
#include <cstring>
#include <span>

#include "apps/libibverbs/abi.h"
#include "apps/libibverbs/provider.h"
#include "stack/device/context.h"
#include "stack/net/net_stack.h"
#include "stack/wire/checksum.h"

namespace uroce::ibv {
namespace {

constexpr uint8_t kIpProtoUdp = 17;  // an IPv6 header's next header for RoCEv2
constexpr size_t kIpv4At = 20;       // where an IPv4 header sits in the 40 bytes

struct Sender {
  Gid src, dst;  // the sender's address, ours
  net::GidType type;
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;
};

// An IPv4 header at offset 20: version 4, no options, and a checksum that
// holds (an IPv6 header or GRH there would be its addresses, which fail it).
bool read_ipv4(const uint8_t* grh, Sender& s) {
  const uint8_t* h = grh + kIpv4At;
  if (h[0] != 0x45 || wire::csum_finish(wire::csum_partial(std::span(h, 20))) != 0) return false;
  s.src = Gid::from_ipv4(h + 12);
  s.dst = Gid::from_ipv4(h + 16);
  s.type = net::GidType::kRoceV2;
  s.traffic_class = h[1];
  return true;
}

// An IPv6 header (next header UDP: RoCEv2) or an IB GRH (RoCEv1).
bool read_ipv6(const uint8_t* grh, Sender& s) {
  if ((grh[0] >> 4) != 6) return false;
  uint32_t w0;
  std::memcpy(&w0, grh, 4);
  w0 = be32toh(w0);
  s.traffic_class = uint8_t(w0 >> 20);
  s.flow_label = w0 & 0xfffff;
  std::memcpy(s.src.raw, grh + 8, 16);
  std::memcpy(s.dst.raw, grh + 24, 16);
  s.type = grh[6] == kIpProtoUdp ? net::GidType::kRoceV2 : net::GidType::kRoceV1;
  return true;
}

}  // namespace
}  // namespace uroce::ibv

using namespace uroce;
using namespace uroce::ibv;

extern "C" {

int ibv_init_ah_from_wc(ibv_context* c, uint8_t port_num, ibv_wc* wc, ibv_grh* grh, ibv_ah_attr* ah) {
  if (!c || !wc || !grh || !ah || port_num != 1) return EINVAL;
  if (!(wc->wc_flags & IBV_WC_GRH)) return EINVAL;  // RoCE addresses by GID: a UD receive always has one
  const auto* g = reinterpret_cast<const uint8_t*>(grh);
  Sender s;
  if (!read_ipv4(g, s) && !read_ipv6(g, s)) return EPROTONOSUPPORT;
  std::optional<uint8_t> sgid;
  {
    Guard lock(Provider::get()->lock());
    sgid = device_of(c)->net->gids().find(s.dst, net::kNoVlan, s.type);
  }
  if (!sgid) return ENOENT;  // not sent to one of our GIDs
  std::memset(ah, 0, sizeof *ah);
  ah->is_global = 1;
  std::memcpy(ah->grh.dgid.raw, s.src.raw, 16);
  ah->grh.sgid_index = *sgid;
  ah->grh.hop_limit = 0xff;  // as rdma-core answers: the reply may take any path back
  ah->grh.traffic_class = s.traffic_class;
  ah->grh.flow_label = s.flow_label;
  ah->sl = wc->sl;
  ah->port_num = port_num;
  return 0;
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (!pd) return fail<ibv_ah>(EINVAL);
  ibv_ah_attr a;
  if (int e = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a)) return fail<ibv_ah>(e);
  return ibv_create_ah(pd, &a);
}

}  // extern "C"
