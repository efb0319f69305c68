// The device verbs: the device list, open and close (with the context's
// async_fd, async.cc), and the queries of the device, its port and its GID
// table (as Linux shows a RoCE device's).
#include <endian.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "apps/libibverbs/abi.h"
#include "apps/libibverbs/provider.h"
#include "stack/device/context.h"
#include "stack/transport/qp.h"

#undef ibv_get_device_list
#undef ibv_query_port

namespace uroce::ibv {

namespace {

constexpr char kProviderName[] = "uroce";  // the ops pointer libmlx5/libefa compare with theirs
Device g_device{};
ibv_device* g_list[2] = {&g_device.dev, nullptr};

uint64_t node_guid(const MacAddr& m) {
  // EUI-64 of the MAC, as ib_core makes a RoCE device's node GUID.
  const uint8_t b[8] = {uint8_t(m.b[0] ^ 2), m.b[1], m.b[2], 0xff, 0xfe, m.b[3], m.b[4], m.b[5]};
  uint64_t be;
  std::memcpy(&be, b, 8);
  return be;
}

int check_port(ibv_context* c, uint8_t port) {
  if (!c || port != 1) return EINVAL;
  return 0;
}

const net::GidEntry* gid_at(ibv_context* c, uint32_t index) {
  return device_of(c)->net->gids().at(uint8_t(std::min<uint32_t>(index, 255)));
}

void fill_device_attr(Provider& p, ibv_device_attr& a) {
  std::memset(&a, 0, sizeof a);
  std::snprintf(a.fw_ver, sizeof a.fw_ver, "uroce");
  a.node_guid = node_guid(p.mac());
  a.sys_image_guid = a.node_guid;
  a.max_mr_size = transport::kMaxMsgBytes;
  a.page_size_cap = 0xfffff000;
  a.vendor_id = 0xffffff;  // no OUI: a software device, as rxe reports
  a.max_qp = int(p.config().max_qp);
  a.max_qp_wr = int(transport::kMaxWr);
  a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;  // no SRQ resize
  a.max_sge = int(transport::kMaxSge);
  a.max_sge_rd = int(transport::kMaxSge);
  const DeviceConfig& dc = p.ctx()->cfg;
  a.max_cq = int(dc.max_cq);
  a.max_cqe = int(transport::kMaxWr);
  a.max_mr = int(dc.max_mr);
  a.max_pd = int(dc.max_pd);
  a.max_qp_rd_atom = transport::kMaxRdAtomic;
  a.max_qp_init_rd_atom = transport::kMaxRdAtomic;
  a.max_res_rd_atom = transport::kMaxRdAtomic * a.max_qp;
  a.atomic_cap = IBV_ATOMIC_HCA;
  a.max_ah = int(dc.max_ah);
  a.max_srq = int(dc.max_srq);
  a.max_srq_wr = int(transport::kMaxWr);
  a.max_srq_sge = int(transport::kMaxSge);
  a.max_pkeys = 1;
  a.local_ca_ack_delay = 15;
  a.phys_port_cnt = 1;
}

int query_port_op(ibv_context* c, uint8_t port, ibv_port_attr* out, size_t len) {
  if (int e = check_port(c, port)) return e;
  ibv_port_attr a{};
  a.state = IBV_PORT_ACTIVE;
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = ibv_mtu(device_of(c)->max_mtu);
  a.gid_tbl_len = net::GidTable::kSize;
  a.port_cap_flags = IBV_PORT_CM_SUP;
  a.max_msg_sz = transport::kMaxMsgBytes;
  a.pkey_tbl_len = 1;
  a.max_vl_num = 1;
  a.active_width = 1;   // 1X
  a.active_speed = 32;  // EDR, as rxe reports for a fast netdev
  a.phys_state = 5;     // LinkUp
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
  std::memcpy(out, &a, std::min(len, sizeof a));
  return 0;
}

int query_device_ex_op(ibv_context* c, const ibv_query_device_ex_input* input, ibv_device_attr_ex* out,
                       size_t len) {
  if (input && input->comp_mask) return EINVAL;
  Provider* p = Provider::get();
  if (!c || !p || len < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex a{};
  Guard g(p->lock());
  fill_device_attr(*p, a.orig_attr);
  std::memcpy(out, &a, std::min(len, sizeof a));
  return 0;
}

}  // namespace

uroce::Context* device_of(ibv_context* c) {
  (void)c;
  return Provider::get()->ctx();
}

}  // namespace uroce::ibv

using namespace uroce;
using namespace uroce::ibv;

extern "C" {

ibv_device** ibv_get_device_list(int* num) {
  Provider* p = Provider::get();
  if (num) *num = p ? 1 : 0;
  if (!p) return static_cast<ibv_device**>(calloc(1, sizeof(ibv_device*)));
  ibv_device& d = g_device.dev;
  if (!g_device.ops) {
    g_device.ops = kProviderName;
    d.node_type = IBV_NODE_CA;
    d.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(d.name, sizeof d.name, "uroce0");
    std::snprintf(d.dev_name, sizeof d.dev_name, "uverbs0");
    std::snprintf(d.dev_path, sizeof d.dev_path, "/sys/class/infiniband_verbs/uverbs0");
    std::snprintf(d.ibdev_path, sizeof d.ibdev_path, "/sys/class/infiniband/uroce0");
  }
  auto** list = static_cast<ibv_device**>(calloc(2, sizeof(ibv_device*)));
  if (!list) return fail<ibv_device*>(ENOMEM);
  list[0] = g_list[0];
  return list;
}

void ibv_free_device_list(ibv_device** list) { free(list); }

const char* ibv_get_device_name(ibv_device* d) { return d ? d->name : nullptr; }

__be64 ibv_get_device_guid(ibv_device* d) {
  Provider* p = Provider::get();
  return d && p ? node_guid(p->mac()) : 0;
}

int ibv_get_device_index(ibv_device* d) { return d == &g_device.dev ? 0 : -1; }

ibv_context* ibv_open_device(ibv_device* d) {
  Provider* p = Provider::get();
  if (d != &g_device.dev || !p) return fail<ibv_context>(ENODEV);
  const int async_fd = make_channel_fd();  // blocking, as a kernel context's; counts the events ready (async.cc)
  if (async_fd < 0) return nullptr;       // errno from eventfd
  {
    Guard g(p->lock());
    start_async_events(*p);
  }
  auto* w = new ContextW{};
  verbs_context& v = w->vctx;
  v.sz = sizeof v;
  v.query_port = query_port_op;
  v.query_device_ex = query_device_ex_op;
  install_ops(v);
  ibv_context& c = v.context;
  c.device = d;
  c.cmd_fd = -1;
  c.async_fd = async_fd;
  c.num_comp_vectors = 1;
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  pthread_mutex_init(&c.mutex, nullptr);
  return &c;
}

int ibv_close_device(ibv_context* c) {
  if (!c) return EINVAL;
  auto* w = reinterpret_cast<ContextW*>(verbs_get_ctx(c));
  Guard g(Provider::get()->lock());
  pthread_mutex_destroy(&c->mutex);
  w->async.close();
  retire([w] {
    close(w->vctx.context.async_fd);
    if (w->async.idle()) delete w;  // else kept for the threads still waiting in ibv_get_async_event
  });
  return 0;
}

int ibv_query_device(ibv_context* c, ibv_device_attr* a) {
  Provider* p = Provider::get();
  if (!c || !a || !p) return EINVAL;
  Guard g(p->lock());
  fill_device_attr(*p, *a);
  return 0;
}

int ibv_query_port(ibv_context* c, uint8_t port, struct _compat_ibv_port_attr* a) {
  // Binaries older than the extended query pass the struct up to link_layer.
  return query_port_op(c, port, reinterpret_cast<ibv_port_attr*>(a), offsetof(ibv_port_attr, link_layer) + 1);
}

int ibv_query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  if (check_port(c, port) || index < 0 || index >= net::GidTable::kSize || !gid) return -1;
  Guard g(Provider::get()->lock());
  const net::GidEntry* e = gid_at(c, uint32_t(index));
  std::memset(gid, 0, sizeof *gid);  // an empty entry reads as the zero GID, as from sysfs
  if (e) std::memcpy(gid->raw, e->gid.raw, 16);
  return 0;
}

int ibv_query_gid_type(ibv_context* c, uint8_t port, unsigned index, int* type) {
  if (check_port(c, port) || index >= net::GidTable::kSize || !type) return -1;
  Guard g(Provider::get()->lock());
  const net::GidEntry* e = gid_at(c, index);
  *type = e && e->type == net::GidType::kRoceV1 ? 0 : 1;  // IBV_GID_TYPE_SYSFS_IB_ROCE_V1 / ROCE_V2
  return 0;
}

int _ibv_query_gid_ex(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags,
                      size_t entry_size) {
  if (check_port(c, uint8_t(port)) || port > 1 || flags || entry_size < sizeof(ibv_gid_entry) || !entry) return EINVAL;
  if (index >= net::GidTable::kSize) return EINVAL;
  Guard g(Provider::get()->lock());
  const net::GidEntry* e = gid_at(c, index);
  if (!e) return ENODATA;
  std::memset(entry, 0, entry_size);
  std::memcpy(entry->gid.raw, e->gid.raw, 16);
  entry->gid_index = index;
  entry->port_num = 1;
  entry->gid_type = e->type == net::GidType::kRoceV1 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* c, ibv_gid_entry* entries, size_t max, uint32_t flags,
                             size_t entry_size) {
  if (!c || flags || entry_size < sizeof(ibv_gid_entry) || (!entries && max)) return -EINVAL;
  size_t n = 0;
  for (uint32_t i = 0; i < net::GidTable::kSize; ++i) {
    auto* out = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + n * entry_size);
    if (n == max) {
      Guard g(Provider::get()->lock());
      if (gid_at(c, i)) return -EINVAL;  // more entries than room
      continue;
    }
    if (_ibv_query_gid_ex(c, 1, i, out, 0, entry_size) == 0) ++n;
  }
  return ssize_t(n);
}

int ibv_query_pkey(ibv_context* c, uint8_t port, int index, __be16* pkey) {
  if (check_port(c, port) || index != 0 || !pkey) return -1;
  *pkey = htobe16(transport::kDefaultPkey);
  return 0;
}

int ibv_get_pkey_index(ibv_context* c, uint8_t port, __be16 pkey) {
  if (check_port(c, port)) return -1;
  return be16toh(pkey) == transport::kDefaultPkey ? 0 : -1;
}

}  // extern "C"
