// The helpers of libibverbs that need no device (strings, rates, fork
// support) and the verbs uroce does not do, each failing as a kernel provider
// fails an unsupported feature: EOPNOTSUPP, never a silent success.
#include <cerrno>
#include <cstddef>

#include <infiniband/verbs.h>

#include "apps/libibverbs/abi.h"

using uroce::ibv::fail;

namespace {

// IBV_RATE_* in enum order, as Mb/s and as multiples of 2.5 Gb/s (verbs.h).
struct Rate {
  ibv_rate rate;
  int mbps;
  int mult;
};
constexpr Rate kRates[] = {
    {IBV_RATE_2_5_GBPS, 2500, 1},    {IBV_RATE_5_GBPS, 5000, 2},       {IBV_RATE_10_GBPS, 10000, 4},
    {IBV_RATE_20_GBPS, 20000, 8},    {IBV_RATE_30_GBPS, 30000, 12},    {IBV_RATE_40_GBPS, 40000, 16},
    {IBV_RATE_60_GBPS, 60000, 24},   {IBV_RATE_80_GBPS, 80000, 32},    {IBV_RATE_120_GBPS, 120000, 48},
    {IBV_RATE_14_GBPS, 14062, 0},    {IBV_RATE_56_GBPS, 56250, 0},     {IBV_RATE_112_GBPS, 112500, 0},
    {IBV_RATE_168_GBPS, 168750, 0},  {IBV_RATE_25_GBPS, 25781, 0},     {IBV_RATE_100_GBPS, 103125, 0},
    {IBV_RATE_200_GBPS, 206250, 0},  {IBV_RATE_300_GBPS, 309375, 0},   {IBV_RATE_28_GBPS, 28125, 0},
    {IBV_RATE_50_GBPS, 53125, 0},    {IBV_RATE_400_GBPS, 425000, 0},   {IBV_RATE_600_GBPS, 637500, 0},
};

const char* pick(const char* const* names, size_t n, size_t i, const char* other) { return i < n ? names[i] : other; }

}  // namespace

extern "C" {

int ibv_rate_to_mult(ibv_rate r) {
  for (const Rate& x : kRates) {
    if (x.rate == r) return x.mult ? x.mult : -1;
  }
  return -1;
}

ibv_rate mult_to_ibv_rate(int mult) {
  for (const Rate& x : kRates) {
    if (x.mult && x.mult == mult) return x.rate;
  }
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(ibv_rate r) {
  for (const Rate& x : kRates) {
    if (x.rate == r) return x.mbps;
  }
  return -1;
}

ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const Rate& x : kRates) {
    if (x.mbps == mbps) return x.rate;
  }
  return IBV_RATE_MAX;
}

const char* ibv_node_type_str(ibv_node_type t) {
  static const char* const names[] = {"unknown", "InfiniBand channel adapter", "InfiniBand switch",
                                      "InfiniBand router", "iWARP NIC", "unspecified", "usNIC", "usNIC UDP"};
  return pick(names, std::size(names), size_t(t) < std::size(names) ? size_t(t) : 0, "unknown");
}

const char* ibv_port_state_str(ibv_port_state s) {
  static const char* const names[] = {"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE",
                                      "PORT_ACTIVE_DEFER"};
  return pick(names, std::size(names), size_t(s), "(invalid port state)");
}

const char* ibv_event_type_str(ibv_event_type e) {
  static const char* const names[] = {
      "CQ error", "local work queue catastrophic error", "invalid request local work queue error",
      "local access violation work queue error", "communication established", "send queue drained",
      "path migrated", "path migration request error", "local catastrophic error", "port active", "port error",
      "LID change", "P_Key change", "SM change", "SRQ catastrophic error", "SRQ limit reached",
      "last WQE reached", "client reregistration", "GID table change", "WQ fatal"};
  return pick(names, std::size(names), size_t(e), "unknown");
}

const char* ibv_wc_status_str(ibv_wc_status s) {
  return uroce::wc_status_str(uroce::WcStatus(size_t(s) <= size_t(IBV_WC_GENERAL_ERR) ? s : IBV_WC_GENERAL_ERR));
}

// Fork: uroce pins nothing (the port reads memory by virtual address), so a
// forked child sees its memory as any process does.
int ibv_fork_init(void) { return 0; }
ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_dontfork_range(void*, size_t) { return 0; }
int ibv_dofork_range(void*, size_t) { return 0; }

// No sysfs device: the files tools read there do not exist.
const char* ibv_get_sysfs_path(void) { return "/sys"; }
int ibv_read_sysfs_file(const char*, const char*, char*, size_t) {
  errno = ENOENT;
  return -1;
}

// ---------------------------------------------------------------- not in uroce (docs/VERBS.md)

int ibv_resize_cq(ibv_cq*, int) { return EOPNOTSUPP; }
int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) { return IBV_REREG_MR_ERR_INPUT; }
int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t*, uint16_t*) { return EOPNOTSUPP; }
int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) { return 0; }  // no in-order guarantee claimed
ibv_context* ibv_import_device(int) { return fail<ibv_context>(EOPNOTSUPP); }
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) { return fail<ibv_pd>(EOPNOTSUPP); }
void ibv_unimport_pd(ibv_pd*) {}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) { return fail<ibv_mr>(EOPNOTSUPP); }
void ibv_unimport_mr(ibv_mr*) {}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) { return fail<ibv_dm>(EOPNOTSUPP); }
void ibv_unimport_dm(ibv_dm*) {}

// Kernel ABI copies (ib_user_verbs structs): no kernel here.
void ibv_copy_qp_attr_from_kern(void*, void*) {}
void ibv_copy_ah_attr_from_kern(void*, void*) {}
void ibv_copy_path_rec_from_kern(void*, void*) {}
void ibv_copy_path_rec_to_kern(void*, void*) {}

}  // extern "C"

// ---------------------------------------------------------------- IBVERBS_PRIVATE_34
// What rdma-core's own providers (libmlx5, libefa, ... which stock perftest
// links) bind. They load beside uroce's library and register, but uroce
// never opens a kernel device through them: each call fails.
#define UROCE_PROVIDER_INT(name) \
  extern "C" int name() { return EOPNOTSUPP; }
#define UROCE_PROVIDER_PTR(name) \
  extern "C" void* name() { return fail(EOPNOTSUPP); }
#define UROCE_PROVIDER_VOID(name) \
  extern "C" void name() {}

UROCE_PROVIDER_VOID(verbs_register_driver_34)
UROCE_PROVIDER_VOID(verbs_set_ops)
UROCE_PROVIDER_VOID(verbs_uninit_context)
UROCE_PROVIDER_VOID(__verbs_log)
UROCE_PROVIDER_PTR(_verbs_init_and_alloc_context)
UROCE_PROVIDER_PTR(verbs_open_device)
UROCE_PROVIDER_INT(verbs_init_cq)
UROCE_PROVIDER_INT(execute_ioctl)
UROCE_PROVIDER_INT(__ioctl_final_num_attrs)
UROCE_PROVIDER_INT(ibv_read_ibdev_sysfs_file)
#define UROCE_IBV_CMDS(X)                                                                                         \
  X(advise_mr) X(alloc_dm) X(alloc_mw) X(alloc_pd) X(attach_mcast) X(close_xrcd) X(create_ah)                     \
  X(create_counters) X(create_cq) X(create_cq_ex) X(create_flow) X(create_flow_action_esp) X(create_qp)           \
  X(create_qp_ex) X(create_qp_ex2) X(create_rwq_ind_table) X(create_srq) X(create_srq_ex) X(create_wq)            \
  X(dealloc_mw) X(dealloc_pd) X(dereg_mr) X(destroy_ah) X(destroy_counters) X(destroy_cq) X(destroy_flow)         \
  X(destroy_flow_action) X(destroy_qp) X(destroy_rwq_ind_table) X(destroy_srq) X(destroy_wq) X(detach_mcast)      \
  X(free_dm) X(get_context) X(modify_cq) X(modify_flow_action_esp) X(modify_qp) X(modify_qp_ex) X(modify_srq)     \
  X(modify_wq) X(open_qp) X(open_xrcd) X(poll_cq) X(post_recv) X(post_send) X(post_srq_recv) X(query_context)     \
  X(query_device_any) X(query_mr) X(query_port) X(query_qp) X(query_srq) X(read_counters) X(reg_dmabuf_mr)        \
  X(reg_dm_mr) X(reg_mr) X(req_notify_cq) X(rereg_mr) X(resize_cq)
#define UROCE_IBV_CMD(op) UROCE_PROVIDER_INT(ibv_cmd_##op)
UROCE_IBV_CMDS(UROCE_IBV_CMD)
// Read by providers when a device goes away under them; uroce's does not.
extern "C" {
bool verbs_allow_disassociate_destroy = false;
}
