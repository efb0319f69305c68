// The extended verbs from a verbs program built against rdma-core's own
// headers and library, run under `uroce run` as two processes on a memif link
// (stock_tools.py --wr-api, tests/verbs/meson.build): ibv_create_cq_ex with
// its start_poll / next_poll / end_poll iterator and read_* ops, and
// ibv_create_qp_ex with the ibv_wr_* post API (ibv_wr_post(3)). One file
// over 800 lines on purpose: it is one program, both ends of one exchange,
// and built like any verbs program it shares only verbs_util.h (its checks).
//
// The client makes every WR with the ibv_wr_* API: on RC SEND, SEND with
// Immediate, inline data (a buffer and a list, changed right after the
// setter), an SGE list, RDMA WRITE and WRITE with Immediate in one batch,
// READ, Compare and Swap and Fetch and Add; on UD SENDs with
// ibv_wr_set_ud_addr. The server checks each message byte for byte as it
// arrives, and both read every completion with the iterator. Error cases:
// wr_complete of a batch with a bad WR (too many SGEs, more WRs than the SQ
// holds, inline data too long, an operation uroce lacks) returns the errno
// and posts none of it; one whose bad WR only post_send finds posts the WRs
// before it and none after; wr_abort posts nothing; a marker SEND after each
// shows the server got nothing else. Creation with wc_flags, send_ops_flags,
// comp_mask bits or flags uroce lacks fails with EOPNOTSUPP (or EINVAL).
//
// Usage: wr_api -p PORT        the server (first), on TCP 127.0.0.1:PORT
//        wr_api -p PORT HOST   the client
// Prints one ok/FAIL line per check, then "wr_api ROLE: N ok, M wrong";
// exits 1 if any check failed.
#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "verbs_util.h"  // beside this file: built like any verbs program, without uroce's include paths

namespace {

using uroce::verbs_test::check;
using uroce::verbs_test::expect_errno;
using uroce::verbs_test::format;
using uroce::verbs_test::verdict;

// ---------------------------------------------------------------- layout

constexpr uint8_t kPort = 1;
constexpr int kGidIndex = 3;  // ::ffff:IPv4, RoCE v2 (docs/VERBS.md's GID table)
constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kPsn = 0x1234;
constexpr size_t kMemBytes = 1 << 20;
constexpr uint32_t kSlotBytes = 4096;  // one receive
constexpr uint32_t kRcRecvs = 16;
constexpr uint32_t kUdRecvs = 8;
constexpr uint32_t kGrhBytes = 40;  // before each UD payload
constexpr uint64_t kUdRecvBase = 100;  // wr_id of the UD receives

// Offsets into each side's registered memory.
constexpr size_t kRcRecvOff = 0;
constexpr size_t kUdRecvOff = 64 << 10;
constexpr size_t kWriteOff = 128 << 10;  // server: WRITE targets
constexpr size_t kReadOff = 192 << 10;   // server: READ source
constexpr size_t kAtomicOff = 256 << 10; // server: the atomics' 8 bytes
constexpr size_t kSrcOff = 320 << 10;    // client: what it sends
constexpr size_t kResultOff = 512 << 10; // client: READ and atomic results

constexpr uint32_t kWriteLen = 3000;
constexpr uint32_t kWriteImmLen = 500;
constexpr uint32_t kReadLen = 2000;
constexpr uint32_t kMarkerLen = 100;
constexpr uint64_t kAtomicStart = 0x1111111111111111ull;
constexpr uint64_t kAtomicSwap = 0x2222222222222222ull;
constexpr uint64_t kAtomicAdd = 5;

constexpr uint32_t kImmSend = 0x12345678;
constexpr uint32_t kImmWrite = 0xfeedbeef;
constexpr uint32_t kImmUd = 0xabcdef01;

constexpr uint64_t kRcOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |
                            IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                            IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
constexpr uint64_t kUdOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
constexpr uint64_t kWcFlags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                              IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SL;

/// Byte i of message seed: what the client sends and the server checks.
uint8_t pattern(int seed, size_t i) { return uint8_t(seed * 37 + i * 11 + (i >> 8)); }

void fill(uint8_t* p, size_t len, int seed, size_t from = 0) {
  for (size_t i = 0; i < len; ++i) p[i] = pattern(seed, from + i);
}

/// The first byte that is not message seed's, or -1 if all len are.
long mismatch(const uint8_t* p, size_t len, int seed) {
  for (size_t i = 0; i < len; ++i) {
    if (p[i] != pattern(seed, i)) return long(i);
  }
  return -1;
}

/// What each side tells the other over TCP.
struct Info {
  uint32_t rc_qpn;
  uint32_t ud_qpn;
  uint32_t rkey;
  uint64_t addr;  // its registered memory
  uint8_t gid[16];
};

// ---------------------------------------------------------------- TCP

int tcp_listen_accept(int port) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(s, 1)) return -1;
  const int c = accept(s, nullptr, nullptr);
  close(s);
  return c;
}

int tcp_connect(const char* host, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) return -1;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < end) {  // the server listens once its device is up
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return s;
    close(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return -1;
}

bool send_all(int fd, const void* p, size_t n) { return send(fd, p, n, MSG_NOSIGNAL) == ssize_t(n); }
bool recv_all(int fd, void* p, size_t n) { return recv(fd, p, n, MSG_WAITALL) == ssize_t(n); }
bool sync_byte(int fd, bool sender) {
  char b = 's';
  return sender ? send_all(fd, &b, 1) : recv_all(fd, &b, 1);
}

// ---------------------------------------------------------------- completions

/// One completion, each field read with the ibv_cq_ex iterator.
struct Completion {
  bool got = false;
  uint64_t wr_id = 0;
  ibv_wc_status status = IBV_WC_GENERAL_ERR;
  ibv_wc_opcode opcode = IBV_WC_SEND;
  uint32_t byte_len = 0;
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;
  unsigned wc_flags = 0;
  uint32_t imm = 0;           // host order, with IBV_WC_WITH_IMM
  std::vector<uint8_t> data;  // a receive's bytes, copied before its buffer went back to the RQ
};

/// Reads a CQ in batches: start_poll, next_poll until ENOENT, end_poll;
/// on_wc runs for each completion inside the batch (the server reposts its
/// receives there, as ibv_rc_pingpong -t does).
class Poller {
 public:
  explicit Poller(ibv_cq_ex* cq, std::function<void(Completion&)> on_wc = {}) : cq_(cq), on_wc_(std::move(on_wc)) {}

  /// The next completion; got is false if none came within 10 s.
  Completion next() {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (queue_.empty() && std::chrono::steady_clock::now() < end) gather();
    if (queue_.empty()) return {};
    Completion c = std::move(queue_.front());
    queue_.pop_front();
    return c;
  }
  bool idle() const { return queue_.empty(); }

 private:
  void gather() {
    ibv_poll_cq_attr attr{};
    int e = ibv_start_poll(cq_, &attr);
    if (e == ENOENT) return;  // no end_poll after ENOENT
    if (e) {
      check(false, format("start_poll: %s", std::strerror(e)));
      return;
    }
    do {
      queue_.push_back(read());
      if (on_wc_) on_wc_(queue_.back());
    } while ((e = ibv_next_poll(cq_)) == 0);
    ibv_end_poll(cq_);
    if (e != ENOENT) check(false, format("next_poll: %s", std::strerror(e)));
  }

  Completion read() {
    Completion c;
    c.got = true;
    c.wr_id = cq_->wr_id;
    c.status = cq_->status;
    c.opcode = ibv_wc_read_opcode(cq_);
    c.byte_len = ibv_wc_read_byte_len(cq_);
    c.qp_num = ibv_wc_read_qp_num(cq_);
    c.src_qp = ibv_wc_read_src_qp(cq_);
    c.wc_flags = ibv_wc_read_wc_flags(cq_);
    if (c.wc_flags & IBV_WC_WITH_IMM) c.imm = be32toh(ibv_wc_read_imm_data(cq_));
    return c;
  }

  ibv_cq_ex* cq_;
  std::function<void(Completion&)> on_wc_;
  std::deque<Completion> queue_;
};

const char* opcode_str(ibv_wc_opcode op) {
  static constexpr std::pair<ibv_wc_opcode, const char*> kNames[] = {
      {IBV_WC_SEND, "SEND"},           {IBV_WC_RDMA_WRITE, "RDMA_WRITE"}, {IBV_WC_RDMA_READ, "RDMA_READ"},
      {IBV_WC_COMP_SWAP, "COMP_SWAP"}, {IBV_WC_FETCH_ADD, "FETCH_ADD"},   {IBV_WC_RECV, "RECV"},
      {IBV_WC_RECV_RDMA_WITH_IMM, "RECV_RDMA_WITH_IMM"},
  };
  for (const auto& [o, name] : kNames) {
    if (o == op) return name;
  }
  return "another opcode";
}

// ---------------------------------------------------------------- set-up

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  uint8_t* mem = nullptr;
  ibv_mr* mr = nullptr;
  ibv_comp_channel* channel = nullptr;  // the server's, on rcq
  ibv_cq_ex* scq = nullptr;
  ibv_cq_ex* rcq = nullptr;
  ibv_qp* rc = nullptr;
  ibv_qp_ex* rcx = nullptr;
  ibv_qp_cap rc_cap{};
  ibv_qp* ud = nullptr;
  ibv_qp_ex* udx = nullptr;
  Info me{};
  Info peer{};
};

ibv_cq_ex* make_cq(ibv_context* ctx, ibv_comp_channel* channel, uint64_t wc_flags, int* err = nullptr) {
  ibv_cq_init_attr_ex a{};
  a.cqe = 64;
  a.channel = channel;
  a.wc_flags = wc_flags;
  errno = 0;
  ibv_cq_ex* cq = ibv_create_cq_ex(ctx, &a);
  if (err) *err = cq ? 0 : errno;
  return cq;
}

ibv_qp* make_qp(Side& s, ibv_qp_type type, uint32_t comp_mask, uint64_t ops, ibv_qp_cap* cap = nullptr,
                int* err = nullptr) {
  ibv_qp_init_attr_ex a{};
  a.send_cq = ibv_cq_ex_to_cq(s.scq);
  a.recv_cq = ibv_cq_ex_to_cq(s.rcq);
  a.cap = {16, 16, 4, 1, 64};  // max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data
  a.qp_type = type;
  a.comp_mask = comp_mask;
  a.pd = s.pd;
  a.send_ops_flags = ops;
  errno = 0;
  ibv_qp* qp = ibv_create_qp_ex(s.ctx, &a);
  if (cap) *cap = a.cap;
  if (err) *err = qp ? 0 : errno;
  return qp;
}

int to_init(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = kPort;
  if (qp->qp_type == IBV_QPT_UD) {
    a.qkey = kQkey;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  }
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int to_rts(ibv_qp* qp, const Info& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  if (qp->qp_type == IBV_QPT_UD) {
    if (int e = ibv_modify_qp(qp, &a, IBV_QP_STATE)) return e;
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = kPsn;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
  }
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer.rc_qpn;
  a.rq_psn = kPsn;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
  a.ah_attr.grh.sgid_index = kGidIndex;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = kPort;
  if (int e = ibv_modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return e;
  }
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = kPsn;
  a.max_rd_atomic = 4;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                           IBV_QP_MAX_QP_RD_ATOMIC);
}

/// The device, memory, extended CQs and QPs of one side; false (with a FAIL line) if any is missing.
bool open_side(Side& s, bool with_channel) {
  s.ctx = uroce::verbs_test::open_first_device();
  if (!s.ctx) return check(false, "a device");
  s.pd = s.ctx ? ibv_alloc_pd(s.ctx) : nullptr;
  s.mem = static_cast<uint8_t*>(aligned_alloc(4096, kMemBytes));
  std::memset(s.mem, 0, kMemBytes);
  s.mr = s.pd ? ibv_reg_mr(s.pd, s.mem, kMemBytes,
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_ATOMIC)
                : nullptr;
  if (!s.mr) return check(false, format("device, PD and MR: %s", std::strerror(errno)));
  s.channel = with_channel ? ibv_create_comp_channel(s.ctx) : nullptr;
  s.scq = make_cq(s.ctx, nullptr, kWcFlags);
  s.rcq = make_cq(s.ctx, s.channel, kWcFlags);
  if (!s.scq || !s.rcq || (with_channel && !s.channel)) return check(false, format("create_cq_ex: %s", std::strerror(errno)));
  s.rc = make_qp(s, IBV_QPT_RC, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, kRcOps, &s.rc_cap);
  s.ud = make_qp(s, IBV_QPT_UD, IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, kUdOps);
  if (!s.rc || !s.ud) return check(false, format("create_qp_ex RC and UD: %s", std::strerror(errno)));
  s.rcx = ibv_qp_to_qp_ex(s.rc);
  s.udx = ibv_qp_to_qp_ex(s.ud);
  check(s.rcx && s.udx, "create_qp_ex with SEND_OPS_FLAGS: ibv_qp_to_qp_ex gives the ibv_qp_ex");
  if (!s.rcx || !s.udx) return false;
  ibv_gid gid;
  if (ibv_query_gid(s.ctx, kPort, kGidIndex, &gid)) return check(false, "query_gid 3");
  s.me.rc_qpn = s.rc->qp_num;
  s.me.ud_qpn = s.ud->qp_num;
  s.me.rkey = s.mr->rkey;
  s.me.addr = reinterpret_cast<uintptr_t>(s.mem);
  std::memcpy(s.me.gid, gid.raw, 16);
  if (to_init(s.rc) || to_init(s.ud)) return check(false, "QPs to INIT");
  return true;
}

bool connect_side(Side& s, int fd) {
  if (!send_all(fd, &s.me, sizeof s.me) || !recv_all(fd, &s.peer, sizeof s.peer)) return check(false, "TCP exchange");
  if (to_rts(s.rc, s.peer) || to_rts(s.ud, s.peer)) return check(false, format("QPs to RTS: %s", std::strerror(errno)));
  return true;
}

void close_side(Side& s) {
  expect_errno("destroy_qp RC (extended)", ibv_destroy_qp(s.rc), 0);
  expect_errno("destroy_qp UD (extended)", ibv_destroy_qp(s.ud), 0);
  expect_errno("destroy_cq of a cq_ex (ibv_cq_ex_to_cq)", ibv_destroy_cq(ibv_cq_ex_to_cq(s.scq)), 0);
  expect_errno("destroy_cq of a cq_ex with a channel", ibv_destroy_cq(ibv_cq_ex_to_cq(s.rcq)), 0);
  if (s.channel) expect_errno("destroy_comp_channel", ibv_destroy_comp_channel(s.channel), 0);
  ibv_dereg_mr(s.mr);
  ibv_dealloc_pd(s.pd);
  ibv_close_device(s.ctx);
  free(s.mem);
}

// ---------------------------------------------------------------- server

/// What the server expects, message by message, in the order the client sends.
struct Expect {
  const char* what;
  ibv_wc_opcode opcode;
  uint32_t len;  // payload bytes (after the GRH on UD)
  int seed;      // -1: no payload to check (WRITE with Immediate)
  bool imm;
  uint32_t imm_data;
  bool ud;
};

constexpr Expect kExpected[] = {
    {"SEND (one SGE)", IBV_WC_RECV, 1000, 1, false, 0, false},
    {"SEND with imm", IBV_WC_RECV, 200, 2, true, kImmSend, false},
    {"SEND inline data", IBV_WC_RECV, 64, 3, false, 0, false},
    {"SEND inline data list", IBV_WC_RECV, 50, 4, false, 0, false},
    {"SEND SGE list", IBV_WC_RECV, 600, 5, false, 0, false},
    {"RDMA WRITE with imm", IBV_WC_RECV_RDMA_WITH_IMM, kWriteImmLen, -1, true, kImmWrite, false},
    {"marker after the too-many-SGEs batch", IBV_WC_RECV, kMarkerLen, 10, false, 0, false},
    {"marker after the over-full batch", IBV_WC_RECV, kMarkerLen, 11, false, 0, false},
    {"marker after wr_abort", IBV_WC_RECV, kMarkerLen, 13, false, 0, false},
    {"the WR before post_send's bad one", IBV_WC_RECV, kMarkerLen, 14, false, 0, false},
    {"marker after post_send's bad WR", IBV_WC_RECV, kMarkerLen, 16, false, 0, false},
    {"marker after the too-long inline batch", IBV_WC_RECV, kMarkerLen, 17, false, 0, false},
    {"marker after the bind_mw batch", IBV_WC_RECV, kMarkerLen, 19, false, 0, false},
    {"UD SEND with set_ud_addr", IBV_WC_RECV, 256, 20, false, 0, true},
    {"UD SEND with imm, inline", IBV_WC_RECV, 32, 21, true, kImmUd, true},
    {"UD marker after the batch without set_ud_addr", IBV_WC_RECV, 16, 22, false, 0, true},
};

uint8_t* slot_of(Side& s, uint64_t wr_id) {
  return wr_id >= kUdRecvBase ? s.mem + kUdRecvOff + (wr_id - kUdRecvBase) * kSlotBytes
                              : s.mem + kRcRecvOff + wr_id * kSlotBytes;
}

int post_slot(Side& s, uint64_t wr_id) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(slot_of(s, wr_id)), kSlotBytes, s.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(wr_id >= kUdRecvBase ? s.ud : s.rc, &wr, &bad);
}

void check_message(Side& s, const Expect& x, const Completion& c) {
  const uint32_t hdr = x.ud ? kGrhBytes : 0;
  const uint32_t qpn = x.ud ? s.ud->qp_num : s.rc->qp_num;
  std::string why;
  if (!c.got) why = "no completion";
  else if (c.status != IBV_WC_SUCCESS) why = ibv_wc_status_str(c.status);
  else if (c.opcode != x.opcode) why = format("opcode %s", opcode_str(c.opcode));
  else if (c.byte_len != x.len + hdr) why = format("byte_len %u", c.byte_len);
  else if (c.qp_num != qpn) why = format("qp_num %u", c.qp_num);
  else if (bool(c.wc_flags & IBV_WC_WITH_IMM) != x.imm) why = format("wc_flags %#x", c.wc_flags);
  else if (x.imm && c.imm != x.imm_data) why = format("imm_data %#x", c.imm);
  else if (x.ud && !(c.wc_flags & IBV_WC_GRH)) why = "no IBV_WC_GRH";
  else if (x.ud && c.src_qp != s.peer.ud_qpn) why = format("src_qp %u", c.src_qp);
  else if (x.seed >= 0 && c.data.size() < hdr + x.len) why = "short data";
  else if (x.seed >= 0) {
    if (const long at = mismatch(c.data.data() + hdr, x.len, x.seed); at >= 0) why = format("byte %ld differs", at);
  }
  check(why.empty(), format("server: %s: %s, %u bytes%s", x.what, opcode_str(x.opcode), x.len,
                            why.empty() ? ", data and completion fields as sent" : (": " + why).c_str()));
}

int run_server(int port) {
  Side s;
  if (!open_side(s, true)) return 1;
  // Receives first: the client sends once it has the server's QPNs.
  int posted = 0;
  for (uint64_t i = 0; i < kRcRecvs; ++i) posted += post_slot(s, i) == 0;
  for (uint64_t i = 0; i < kUdRecvs; ++i) posted += post_slot(s, kUdRecvBase + i) == 0;
  check(posted == int(kRcRecvs + kUdRecvs), format("server: %d of %u receives posted", posted, kRcRecvs + kUdRecvs));
  fill(s.mem + kReadOff, kReadLen, 8);
  std::memcpy(s.mem + kAtomicOff, &kAtomicStart, 8);
  const int fd = tcp_listen_accept(port);
  if (fd < 0) {
    check(false, "TCP accept");
    return 1;
  }
  if (!connect_side(s, fd)) return 1;
  expect_errno("req_notify_cq on a cq_ex (ibv_cq_ex_to_cq)", ibv_req_notify_cq(ibv_cq_ex_to_cq(s.rcq), 0), 0);
  sync_byte(fd, true);  // ready: the client may send

  // The first message comes as an event on the cq_ex's channel.
  pollfd pf{s.channel->fd, POLLIN, 0};
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  const bool event = poll(&pf, 1, 10000) == 1 && ibv_get_cq_event(s.channel, &ev_cq, &ev_ctx) == 0;
  check(event && ev_cq == ibv_cq_ex_to_cq(s.rcq), "server: the cq_ex's completion event on its channel");
  if (event) ibv_ack_cq_events(ev_cq, 1);

  // Each receive is copied out and its buffer reposted inside the poll batch.
  int reposts_failed = 0;
  Poller rcq(s.rcq, [&](Completion& c) {
    if (c.status != IBV_WC_SUCCESS || !(c.opcode & IBV_WC_RECV)) return;
    const uint8_t* slot = slot_of(s, c.wr_id);
    c.data.assign(slot, slot + std::min(c.byte_len, kSlotBytes));
    reposts_failed += post_slot(s, c.wr_id) != 0;
  });
  for (const Expect& x : kExpected) {
    const Completion c = rcq.next();
    check_message(s, x, c);
    if (x.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      // The WRITE before it in the same batch has landed too (RC is ordered).
      const long a = mismatch(s.mem + kWriteOff, kWriteLen, 6);
      const long b = mismatch(s.mem + kWriteOff + 4096, kWriteImmLen, 7);
      check(a < 0 && b < 0, format("server: RDMA WRITE (%u bytes) and WRITE with imm (%u bytes) in memory: first "
                                   "bad byte %ld / %ld",
                                   kWriteLen, kWriteImmLen, a, b));
    }
  }
  check(reposts_failed == 0, format("server: post_recv inside start_poll..end_poll: %d failed", reposts_failed));
  check(rcq.idle(), "server: nothing arrived beyond the expected messages");

  // The last one through ibv_poll_cq on the cq_ex's ibv_cq.
  sync_byte(fd, true);
  ibv_wc wc{};
  int got = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got == 0 && std::chrono::steady_clock::now() < end) got = ibv_poll_cq(ibv_cq_ex_to_cq(s.rcq), 1, &wc);
  check(got == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == kMarkerLen &&
            mismatch(slot_of(s, wc.wr_id), kMarkerLen, 30) < 0,
        "server: ibv_poll_cq on ibv_cq_ex_to_cq(cq_ex): the last SEND");

  uint64_t v;
  std::memcpy(&v, s.mem + kAtomicOff, 8);
  check(v == kAtomicSwap + kAtomicAdd, format("server: the atomics' target is %#llx", static_cast<unsigned long long>(v)));
  sync_byte(fd, false);  // the client is done with the server's memory
  close(fd);
  close_side(s);
  return 0;
}

// ---------------------------------------------------------------- client

/// Create-time checks: what uroce has not is refused, not ignored.
void creation_checks(Side& s) {
  int e = 0;
  const std::pair<const char*, uint64_t> wc_cases[] = {
      {"IBV_WC_EX_WITH_COMPLETION_TIMESTAMP", IBV_WC_EX_WITH_COMPLETION_TIMESTAMP},
      {"IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK", IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK},
      {"IBV_WC_EX_WITH_CVLAN", IBV_WC_EX_WITH_CVLAN},
      {"IBV_WC_EX_WITH_FLOW_TAG", IBV_WC_EX_WITH_FLOW_TAG},
  };
  for (const auto& [name, flag] : wc_cases) {
    (void)make_cq(s.ctx, nullptr, kWcFlags | flag, &e);
    expect_errno(format("create_cq_ex with %s", name), e, EOPNOTSUPP);
  }
  ibv_cq_init_attr_ex ca{};
  ca.cqe = 16;
  ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
  errno = 0;
  expect_errno("create_cq_ex with IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN", ibv_create_cq_ex(s.ctx, &ca) ? 0 : errno,
               EOPNOTSUPP);
  ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;  // a parent domain
  ca.flags = 0;
  errno = 0;
  expect_errno("create_cq_ex with a parent domain", ibv_create_cq_ex(s.ctx, &ca) ? 0 : errno, EOPNOTSUPP);

  constexpr uint32_t kEx = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  const std::tuple<const char*, ibv_qp_type, uint64_t> op_cases[] = {
      {"RC with IBV_QP_EX_WITH_BIND_MW", IBV_QPT_RC, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW},
      {"RC with IBV_QP_EX_WITH_TSO", IBV_QPT_RC, IBV_QP_EX_WITH_TSO},
      {"RC with IBV_QP_EX_WITH_ATOMIC_WRITE", IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_WRITE},
      {"UC with IBV_QP_EX_WITH_RDMA_READ", IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_READ},
      {"UD with IBV_QP_EX_WITH_RDMA_WRITE", IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE},
  };
  for (const auto& [name, type, ops] : op_cases) {
    (void)make_qp(s, type, kEx, ops, nullptr, &e);
    expect_errno(format("create_qp_ex %s", name), e, EOPNOTSUPP);
  }
  (void)make_qp(s, IBV_QPT_RC, kEx | IBV_QP_INIT_ATTR_XRCD, IBV_QP_EX_WITH_SEND, nullptr, &e);
  expect_errno("create_qp_ex with IBV_QP_INIT_ATTR_XRCD", e, EOPNOTSUPP);
  {
    ibv_qp_init_attr_ex a{};
    a.send_cq = a.recv_cq = ibv_cq_ex_to_cq(s.scq);
    a.cap = {4, 4, 1, 1, 0};
    a.qp_type = IBV_QPT_RC;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    a.pd = s.pd;
    a.create_flags = IBV_QP_CREATE_SCATTER_FCS;
    errno = 0;
    expect_errno("create_qp_ex with IBV_QP_CREATE_SCATTER_FCS", ibv_create_qp_ex(s.ctx, &a) ? 0 : errno, EOPNOTSUPP);
    a.create_flags = 0;  // CREATE_FLAGS with no flag: a QP without the ibv_wr_* API
    ibv_qp* plain = ibv_create_qp_ex(s.ctx, &a);
    check(plain && !ibv_qp_to_qp_ex(plain), "create_qp_ex without SEND_OPS_FLAGS: ibv_qp_to_qp_ex gives NULL");
    if (plain) ibv_destroy_qp(plain);
  }
  (void)make_qp(s, IBV_QPT_RC, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, IBV_QP_EX_WITH_SEND, nullptr, &e);
  expect_errno("create_qp_ex without IBV_QP_INIT_ATTR_PD", e, EINVAL);
  {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = ibv_cq_ex_to_cq(s.scq);
    a.cap = {4, 4, 1, 1, 0};
    a.qp_type = IBV_QPT_RC;
    ibv_qp* plain = ibv_create_qp(s.pd, &a);
    check(plain && !ibv_qp_to_qp_ex(plain), "ibv_create_qp's QP: ibv_qp_to_qp_ex gives NULL");
    if (plain) ibv_destroy_qp(plain);
  }
  ibv_poll_cq_attr pa{};
  expect_errno("start_poll on an empty cq_ex", ibv_start_poll(s.scq, &pa), ENOENT);
  ibv_wc wc;
  check(ibv_poll_cq(ibv_cq_ex_to_cq(s.scq), 1, &wc) == 0, "ibv_poll_cq on ibv_cq_ex_to_cq(cq_ex): empty, 0");
  ibv_wr_start(s.rcx);
  expect_errno("wr_complete with no WR", ibv_wr_complete(s.rcx), 0);
}

struct Client {
  Side s;
  Poller scq{nullptr};
  ibv_ah* ah = nullptr;

  uint8_t* src(size_t off) { return s.mem + kSrcOff + off; }
  uint64_t addr(const uint8_t* p) { return reinterpret_cast<uintptr_t>(p); }
  uint64_t remote(size_t off) const { return s.peer.addr + off; }

  /// Begins a signaled WR with wr_id on qpx.
  static void signaled(ibv_qp_ex* x, uint64_t wr_id, unsigned flags = IBV_SEND_SIGNALED) {
    x->wr_id = wr_id;
    x->wr_flags = flags;
  }

  /// The next send completion must be wr_id's, successful, with opcode on qpn
  /// (and byte_len where given).
  void expect_sent(const std::string& what, uint64_t wr_id, ibv_wc_opcode opcode, uint32_t qpn, int byte_len = -1) {
    const Completion c = scq.next();
    std::string why;
    if (!c.got) why = "no completion";
    else if (c.wr_id != wr_id) why = format("wr_id %llu", static_cast<unsigned long long>(c.wr_id));
    else if (c.status != IBV_WC_SUCCESS) why = ibv_wc_status_str(c.status);
    else if (c.opcode != opcode) why = format("opcode %s", opcode_str(c.opcode));
    else if (c.qp_num != qpn) why = format("qp_num %u", c.qp_num);
    else if (byte_len >= 0 && c.byte_len != uint32_t(byte_len)) why = format("byte_len %u", c.byte_len);
    check(why.empty(), format("client: %s: completion wr_id %llu %s%s", what.c_str(),
                              static_cast<unsigned long long>(wr_id), opcode_str(opcode),
                              why.empty() ? "" : (": " + why).c_str()));
  }

  /// A signaled SEND of kMarkerLen bytes of seed: shows what the server got before it.
  void marker(const std::string& after, uint64_t wr_id, int seed) {
    fill(src(0x8000), kMarkerLen, seed);
    ibv_wr_start(s.rcx);
    signaled(s.rcx, wr_id);
    ibv_wr_send(s.rcx);
    ibv_wr_set_sge(s.rcx, s.mr->lkey, addr(src(0x8000)), kMarkerLen);
    expect_errno("marker SEND after " + after + ": wr_complete", ibv_wr_complete(s.rcx), 0);
    expect_sent("marker after " + after + " (nothing of it was posted)", wr_id, IBV_WC_SEND, s.rc->qp_num);
  }

  void rc_sends() {
    ibv_qp_ex* x = s.rcx;
    const uint32_t lkey = s.mr->lkey;
    const uint32_t qpn = s.rc->qp_num;

    fill(src(0), 1000, 1);
    ibv_wr_start(x);
    signaled(x, 1);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, lkey, addr(src(0)), 1000);
    expect_errno("SEND: wr_complete", ibv_wr_complete(x), 0);
    expect_sent("SEND", 1, IBV_WC_SEND, qpn, 1000);

    fill(src(0), 200, 2);
    ibv_wr_start(x);
    signaled(x, 2);
    ibv_wr_send_imm(x, htobe32(kImmSend));
    ibv_wr_set_sge(x, lkey, addr(src(0)), 200);
    expect_errno("SEND with imm: wr_complete", ibv_wr_complete(x), 0);
    expect_sent("SEND with imm", 2, IBV_WC_SEND, qpn);

    // Inline: the setter copies, so the buffer is scribbled on before wr_complete.
    uint8_t tmp[64];
    fill(tmp, sizeof tmp, 3);
    ibv_wr_start(x);
    signaled(x, 3);
    ibv_wr_send(x);
    ibv_wr_set_inline_data(x, tmp, sizeof tmp);
    std::memset(tmp, 0xee, sizeof tmp);
    expect_errno("SEND inline data: wr_complete", ibv_wr_complete(x), 0);
    expect_sent("SEND inline data", 3, IBV_WC_SEND, qpn);

    uint8_t a[20], b[30];
    fill(a, sizeof a, 4);
    fill(b, sizeof b, 4, sizeof a);
    const ibv_data_buf bufs[] = {{a, sizeof a}, {b, sizeof b}};
    ibv_wr_start(x);
    signaled(x, 4);
    ibv_wr_send(x);
    ibv_wr_set_inline_data_list(x, 2, bufs);
    std::memset(a, 0xee, sizeof a);
    std::memset(b, 0xee, sizeof b);
    expect_errno("SEND inline data list: wr_complete", ibv_wr_complete(x), 0);
    expect_sent("SEND inline data list", 4, IBV_WC_SEND, qpn);

    // An SGE list of three pieces far apart.
    ibv_sge sges[3] = {{addr(src(0x1000)), 100, lkey}, {addr(src(0x2000)), 200, lkey}, {addr(src(0x3000)), 300, lkey}};
    fill(src(0x1000), 100, 5, 0);
    fill(src(0x2000), 200, 5, 100);
    fill(src(0x3000), 300, 5, 300);
    ibv_wr_start(x);
    signaled(x, 5);
    ibv_wr_send(x);
    ibv_wr_set_sge_list(x, 3, sges);
    std::memset(sges, 0, sizeof sges);  // the setter copied the list
    expect_errno("SEND SGE list: wr_complete", ibv_wr_complete(x), 0);
    expect_sent("SEND SGE list", 5, IBV_WC_SEND, qpn, 600);

    // WRITE (unsignaled) and WRITE with imm (signaled) in one batch: one completion.
    fill(src(0x4000), kWriteLen, 6);
    fill(src(0x5000), kWriteImmLen, 7);
    ibv_wr_start(x);
    signaled(x, 61, 0);
    ibv_wr_rdma_write(x, s.peer.rkey, remote(kWriteOff));
    ibv_wr_set_sge(x, lkey, addr(src(0x4000)), kWriteLen);
    signaled(x, 62);
    ibv_wr_rdma_write_imm(x, s.peer.rkey, remote(kWriteOff + 4096), htobe32(kImmWrite));
    ibv_wr_set_sge(x, lkey, addr(src(0x5000)), kWriteImmLen);
    expect_errno("RDMA WRITE + WRITE with imm in one batch: wr_complete", ibv_wr_complete(x), 0);
    expect_sent("WRITE with imm (the unsignaled WRITE before it gives none)", 62, IBV_WC_RDMA_WRITE, qpn);
  }

  void rc_reads_and_atomics() {
    ibv_qp_ex* x = s.rcx;
    const uint32_t lkey = s.mr->lkey;
    const uint32_t qpn = s.rc->qp_num;
    uint8_t* res = s.mem + kResultOff;

    ibv_wr_start(x);
    signaled(x, 7);
    ibv_wr_rdma_read(x, s.peer.rkey, remote(kReadOff));
    ibv_wr_set_sge(x, lkey, addr(res), kReadLen);
    expect_errno("RDMA READ: wr_complete", ibv_wr_complete(x), 0);
    expect_sent("RDMA READ", 7, IBV_WC_RDMA_READ, qpn, kReadLen);
    const long at = mismatch(res, kReadLen, 8);
    check(at < 0, format("client: RDMA READ: %u bytes as the server wrote them (first bad byte %ld)", kReadLen, at));

    // Compare and Swap, Fetch and Add, then READ the target back, in one batch.
    ibv_wr_start(x);
    signaled(x, 81);
    ibv_wr_atomic_cmp_swp(x, s.peer.rkey, remote(kAtomicOff), kAtomicStart, kAtomicSwap);
    ibv_wr_set_sge(x, lkey, addr(res + 4096), 8);
    signaled(x, 82);
    ibv_wr_atomic_fetch_add(x, s.peer.rkey, remote(kAtomicOff), kAtomicAdd);
    ibv_wr_set_sge(x, lkey, addr(res + 4104), 8);
    signaled(x, 83);
    ibv_wr_rdma_read(x, s.peer.rkey, remote(kAtomicOff));
    ibv_wr_set_sge(x, lkey, addr(res + 4112), 8);
    expect_errno("CMP_SWP + FETCH_ADD + READ in one batch: wr_complete", ibv_wr_complete(x), 0);
    expect_sent("atomic compare and swap", 81, IBV_WC_COMP_SWAP, qpn, 8);
    expect_sent("atomic fetch and add", 82, IBV_WC_FETCH_ADD, qpn, 8);
    expect_sent("READ of the atomics' target", 83, IBV_WC_RDMA_READ, qpn, 8);
    uint64_t v[3];
    std::memcpy(v, res + 4096, sizeof v);
    check(v[0] == kAtomicStart && v[1] == kAtomicSwap && v[2] == kAtomicSwap + kAtomicAdd,
          format("client: atomics: CMP_SWP returned %#llx, FETCH_ADD %#llx, the target is %#llx",
                 static_cast<unsigned long long>(v[0]), static_cast<unsigned long long>(v[1]),
                 static_cast<unsigned long long>(v[2])));
  }

  void rc_errors() {
    ibv_qp_ex* x = s.rcx;
    const uint32_t lkey = s.mr->lkey;
    fill(src(0x9000), kMarkerLen, 9);
    const uint64_t a9 = addr(src(0x9000));

    // One SGE too many in the middle WR: EINVAL, and none of the three goes.
    std::vector<ibv_sge> many(s.rc_cap.max_send_sge + 1, ibv_sge{a9, 1, lkey});
    ibv_wr_start(x);
    signaled(x, 91);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, lkey, a9, kMarkerLen);
    signaled(x, 92);
    ibv_wr_send(x);
    ibv_wr_set_sge_list(x, many.size(), many.data());
    signaled(x, 93);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, lkey, a9, kMarkerLen);
    expect_errno(format("wr_complete with %zu SGEs in one WR (max_send_sge %u)", many.size(), s.rc_cap.max_send_sge),
                 ibv_wr_complete(x), EINVAL);
    marker("the too-many-SGEs batch", 94, 10);

    // One WR more than the SQ holds: ENOMEM, none goes.
    ibv_wr_start(x);
    for (uint32_t i = 0; i <= s.rc_cap.max_send_wr; ++i) {
      signaled(x, 1000 + i);
      ibv_wr_send(x);
      ibv_wr_set_sge(x, lkey, a9, kMarkerLen);
    }
    expect_errno(format("wr_complete with %u WRs (max_send_wr %u)", s.rc_cap.max_send_wr + 1, s.rc_cap.max_send_wr),
                 ibv_wr_complete(x), ENOMEM);
    marker("the over-full batch", 95, 11);

    ibv_wr_start(x);
    signaled(x, 96);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, lkey, a9, kMarkerLen);
    ibv_wr_abort(x);
    marker("wr_abort", 97, 13);

    // A bad WR only post_send can tell (an atomic needs one 8-byte SGE): the
    // WR before it goes, the one after does not.
    fill(src(0xa000), kMarkerLen, 14);
    ibv_wr_start(x);
    signaled(x, 98);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, lkey, addr(src(0xa000)), kMarkerLen);
    signaled(x, 99);
    ibv_wr_atomic_fetch_add(x, s.peer.rkey, remote(kAtomicOff), 1);
    ibv_wr_set_sge(x, lkey, addr(s.mem + kResultOff + 8192), 4);
    signaled(x, 150);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, lkey, a9, kMarkerLen);
    expect_errno("wr_complete with a 4-byte FETCH_ADD second", ibv_wr_complete(x), EINVAL);
    expect_sent("the WR before the bad one", 98, IBV_WC_SEND, s.rc->qp_num);
    marker("post_send's bad WR", 151, 16);

    std::vector<uint8_t> big(s.rc_cap.max_inline_data + 1, 0x5a);
    ibv_wr_start(x);
    signaled(x, 152);
    ibv_wr_send(x);
    ibv_wr_set_inline_data(x, big.data(), big.size());
    expect_errno(format("wr_complete with %zu inline bytes (max_inline_data %u)", big.size(),
                        s.rc_cap.max_inline_data),
                 ibv_wr_complete(x), EINVAL);
    marker("the too-long inline batch", 153, 17);

    // Memory windows: uroce has none; the builder fails the batch.
    ibv_wr_start(x);
    signaled(x, 154);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, lkey, a9, kMarkerLen);
    ibv_wr_bind_mw(x, nullptr, 0, nullptr);
    expect_errno("wr_complete after ibv_wr_bind_mw", ibv_wr_complete(x), EOPNOTSUPP);
    marker("the bind_mw batch", 155, 19);
  }

  void ud_sends() {
    ibv_qp_ex* x = s.udx;
    const uint32_t lkey = s.mr->lkey;
    const uint32_t qpn = s.ud->qp_num;
    ibv_ah_attr aa{};
    aa.is_global = 1;
    std::memcpy(aa.grh.dgid.raw, s.peer.gid, 16);
    aa.grh.sgid_index = kGidIndex;
    aa.grh.hop_limit = 64;
    aa.port_num = kPort;
    ah = ibv_create_ah(s.pd, &aa);
    if (!check(ah != nullptr, "create_ah to the server")) return;

    fill(src(0xb000), 256, 20);
    ibv_wr_start(x);
    signaled(x, 201);
    ibv_wr_send(x);
    ibv_wr_set_ud_addr(x, ah, s.peer.ud_qpn, kQkey);
    ibv_wr_set_sge(x, lkey, addr(src(0xb000)), 256);
    expect_errno("UD SEND with set_ud_addr: wr_complete", ibv_wr_complete(x), 0);
    expect_sent("UD SEND", 201, IBV_WC_SEND, qpn);

    uint8_t tmp[32];
    fill(tmp, sizeof tmp, 21);
    ibv_wr_start(x);
    signaled(x, 202);
    ibv_wr_send_imm(x, htobe32(kImmUd));
    ibv_wr_set_ud_addr(x, ah, s.peer.ud_qpn, kQkey);
    ibv_wr_set_inline_data(x, tmp, sizeof tmp);
    expect_errno("UD SEND with imm, inline: wr_complete", ibv_wr_complete(x), 0);
    expect_sent("UD SEND with imm", 202, IBV_WC_SEND, qpn);

    ibv_wr_start(x);
    signaled(x, 203);
    ibv_wr_send(x);
    ibv_wr_set_sge(x, lkey, addr(src(0xb000)), 16);
    expect_errno("UD wr_complete without set_ud_addr", ibv_wr_complete(x), EINVAL);

    fill(src(0xc000), 16, 22);
    ibv_wr_start(x);
    signaled(x, 204);
    ibv_wr_send(x);
    ibv_wr_set_ud_addr(x, ah, s.peer.ud_qpn, kQkey);
    ibv_wr_set_sge(x, lkey, addr(src(0xc000)), 16);
    expect_errno("UD marker: wr_complete", ibv_wr_complete(x), 0);
    expect_sent("UD marker (nothing of the bad batch was posted)", 204, IBV_WC_SEND, qpn);
  }

  int run(const char* host, int port) {
    if (!open_side(s, false)) return 1;
    scq = Poller(s.scq);
    creation_checks(s);
    const int fd = tcp_connect(host, port);
    if (fd < 0) {
      check(false, "TCP connect");
      return 1;
    }
    if (!connect_side(s, fd) || !sync_byte(fd, false)) return 1;
    rc_sends();
    rc_reads_and_atomics();
    rc_errors();
    ud_sends();
    // The last SEND once the server has read the others (it takes it with ibv_poll_cq).
    sync_byte(fd, false);
    fill(src(0xd000), kMarkerLen, 30);
    ibv_wr_start(s.rcx);
    signaled(s.rcx, 300);
    ibv_wr_send(s.rcx);
    ibv_wr_set_sge(s.rcx, s.mr->lkey, addr(src(0xd000)), kMarkerLen);
    expect_errno("last SEND: wr_complete", ibv_wr_complete(s.rcx), 0);
    expect_sent("last SEND", 300, IBV_WC_SEND, s.rc->qp_num);
    check(scq.idle(), "client: no completion beyond the expected ones");
    sync_byte(fd, true);
    close(fd);
    if (ah) expect_errno("destroy_ah", ibv_destroy_ah(ah), 0);
    close_side(s);
    return 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  const char* host = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-p") && i + 1 < argc) {
      port = std::atoi(argv[++i]);
    } else {
      host = argv[i];
    }
  }
  if (port <= 0) {
    std::fprintf(stderr, "usage: wr_api -p PORT [HOST]\n");
    return 2;
  }
  const char* role = host ? "client" : "server";
  int rc;
  if (host) {
    Client c;
    rc = c.run(host, port);
  } else {
    rc = run_server(port);
  }
  const int failed = verdict(format("wr_api %s", role));
  return rc || failed ? 1 : 0;
}
