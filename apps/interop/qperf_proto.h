// qperf 0.4.11's control protocol as `uroce qperf` speaks it: the messages of
// its TCP control connection, their encoding, its test table, and the
// arithmetic and number format of its results (github linux-rdma/qperf, tag
// v0.4.11, src/qperf.c, support.c, rdma.c; read for the facts only; the
// protocol is written up in docs/CM.md "qperf -cm1"). Header-only, control path.
//
// Encoding (support.c enc_int / enc_str): integers little-endian at their C
// size, strings as their whole char array, the fields one after the other;
// each message is sent at its struct's C size, so STAT and NODE end in
// padding (4 bytes each) that carries nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace uroce::apps::qperf {

constexpr uint16_t kVerMaj = 0, kVerMin = 4, kVerInc = 11;  // the version we speak
constexpr size_t kStrSize = 64;
constexpr size_t kReqBytes = 200, kReqVersionBytes = 6, kNodeBytes = 40, kStatBytes = 256, kConfBytes = 4 * kStrSize;
constexpr char kSyncBefore[] = "synchronization before test";
constexpr char kSyncAfter[] = "synchronization after test";

/// qperf 0.4.11's test table (qperf.c Tests[], built with RDMA): the index is req_index.
constexpr std::string_view kTests[] = {
    "conf", "quit", "rds_bw", "rds_lat", "sctp_bw", "sctp_lat", "sdp_bw", "sdp_lat", "tcp_bw", "tcp_lat",
    "udp_bw", "udp_lat", "rc_bi_bw", "rc_bw", "rc_compare_swap_mr", "rc_fetch_add_mr", "rc_lat",
    "rc_rdma_read_bw", "rc_rdma_read_lat", "rc_rdma_write_bw", "rc_rdma_write_lat", "rc_rdma_write_poll_lat",
    "uc_bi_bw", "uc_bw", "uc_lat", "uc_rdma_write_bw", "uc_rdma_write_lat", "uc_rdma_write_poll_lat", "ud_bi_bw",
    "ud_bw", "ud_lat", "ver_rc_compare_swap", "ver_rc_fetch_add", "xrc_bi_bw", "xrc_bw", "xrc_lat",
};
constexpr std::optional<uint16_t> test_index(std::string_view name) {
  for (size_t i = 0; i < std::size(kTests); ++i) {
    if (kTests[i] == name) return uint16_t(i);
  }
  return std::nullopt;
}
struct Req {
  uint16_t ver_maj = kVerMaj, ver_min = kVerMin, ver_inc = kVerInc, req_index = 0;
  uint32_t access_recv = 0, affinity = 0, alt_port = 0, flip = 0, msg_size = 0, mtu_size = 0, no_msgs = 0,
           poll_mode = 0, port = 0, rd_atomic = 0, sl = 0, sock_buf_size = 0, src_path_bits = 0, time = 0,
           timeout = 0, use_cm = 0;
  char id[kStrSize] = {}, static_rate[kStrSize] = {};
};
struct Ustat {
  uint64_t bytes = 0, msgs = 0, errs = 0;
};
constexpr size_t kTimes = 9;  // T_REAL, T_USER, T_NICE, T_KERNEL, T_IDLE, T_IOWAIT, T_IRQ, T_SOFTIRQ, T_STEAL
struct Stat {
  uint32_t no_cpus = 0, no_ticks = 0, max_cqes = 0;
  std::array<uint64_t, kTimes> time_s{}, time_e{};
  Ustat s, r, rem_s, rem_r;
};
struct Node {
  uint64_t vaddr = 0;
  uint32_t lid = 0, qpn = 0, psn = 0, srqn = 0, rkey = 0, alt_lid = 0, rd_atomic = 0;
};

// Each struct's fields in wire order, once; encoding and decoding both walk them.
template <typename R, typename F>
void req_fields(R& q, F&& f) {
  f(q.ver_maj), f(q.ver_min), f(q.ver_inc), f(q.req_index), f(q.access_recv), f(q.affinity), f(q.alt_port),
      f(q.flip), f(q.msg_size), f(q.mtu_size), f(q.no_msgs), f(q.poll_mode), f(q.port), f(q.rd_atomic), f(q.sl),
      f(q.sock_buf_size), f(q.src_path_bits), f(q.time), f(q.timeout), f(q.use_cm), f(q.id), f(q.static_rate);
}
template <typename S, typename F>
void stat_fields(S& s, F&& f) {
  f(s.no_cpus), f(s.no_ticks), f(s.max_cqes);
  for (auto& t : s.time_s) f(t);
  for (auto& t : s.time_e) f(t);
  for (auto* u : {&s.s, &s.r, &s.rem_s, &s.rem_r}) f(u->bytes), f(u->msgs), f(u->errs);
}
template <typename N, typename F>
void node_fields(N& n, F&& f) {
  f(n.vaddr), f(n.lid), f(n.qpn), f(n.psn), f(n.srqn), f(n.rkey), f(n.alt_lid), f(n.rd_atomic);
}

/// qperf's enc_int / enc_str: little-endian integers, strings as their full array.
struct Enc {
  uint8_t* p;
  template <typename T>
  void operator()(const T& v) {
    if constexpr (std::is_array_v<T>) {
      std::memcpy(p, v, sizeof(v));
    } else {
      for (size_t i = 0; i < sizeof(T); ++i) p[i] = uint8_t(uint64_t(v) >> (8 * i));
    }
    p += sizeof(T);
  }
};
struct Dec {
  const uint8_t* p;
  template <typename T>
  void operator()(T& v) {
    if constexpr (std::is_array_v<T>) {
      std::memcpy(v, p, sizeof(v));
      v[sizeof(v) - 1] = 0;
    } else {
      uint64_t x = 0;
      for (size_t i = 0; i < sizeof(T); ++i) x |= uint64_t(p[i]) << (8 * i);
      v = T(x);
    }
    p += sizeof(T);
  }
};

/// The request of a qperf client with -cm1 for test `index`: what qperf's client() and
/// rd_params() leave in it (msg_size, time -t or, with -n, no_msgs and time 0, timeout
/// DEF_TIMEOUT 5, use_cm 1; the rest 0).
inline Req client_request(uint16_t index, uint32_t msg_size, uint32_t time_s, uint32_t no_msgs) {
  Req q;
  q.req_index = index;
  q.msg_size = msg_size;
  q.no_msgs = no_msgs;
  q.time = no_msgs ? 0 : time_s;
  q.timeout = 5;
  q.use_cm = 1;
  return q;
}

/// Each message at its wire size; decoding reads exactly that many bytes of in.
inline std::array<uint8_t, kReqBytes> encode_req(const Req& q) {
  std::array<uint8_t, kReqBytes> b{};
  req_fields(q, Enc{b.data()});
  return b;
}
inline std::array<uint8_t, kStatBytes> encode_stat(const Stat& s) {
  std::array<uint8_t, kStatBytes> b{};
  stat_fields(s, Enc{b.data()});
  return b;
}
inline std::array<uint8_t, kNodeBytes> encode_node(const Node& n) {
  std::array<uint8_t, kNodeBytes> b{};
  node_fields(n, Enc{b.data()});
  return b;
}
inline Req decode_req(const uint8_t* in) {
  Req q;
  req_fields(q, Dec{in});
  return q;
}
inline Stat decode_stat(const uint8_t* in) {
  Stat s;
  stat_fields(s, Dec{in});
  return s;
}
inline Node decode_node(const uint8_t* in) {
  Node n;
  node_fields(n, Dec{in});
  return n;
}

// ------------------------------------------------------------------ results (qperf's calc_results, place_val)
struct Results {
  double latency_s = 0, msg_rate = 0, send_bw = 0, recv_bw = 0, loc_real_s = 0, rem_real_s = 0;
};

inline double real_s(const Stat& s) {
  return s.no_ticks ? double(s.time_e[0] - s.time_s[0]) / s.no_ticks : 0;
}

/// One side's count alone, or both over the mean of the two real times (qperf's rule).
inline double rate(uint64_t loc, uint64_t rem, double loc_t, double rem_t) {
  if (!rem) return loc / loc_t;
  if (!loc) return rem / rem_t;
  return (loc + rem) / ((loc_t + rem_t) / 2);
}

inline Results calc(const Stat& l, const Stat& r) {
  Results res;
  res.loc_real_s = real_s(l);
  res.rem_real_s = real_s(r);
  if (const uint64_t msgs = l.r.msgs + r.r.msgs; msgs) res.latency_s = res.loc_real_s / double(msgs);
  if (res.loc_real_s == 0 || res.rem_real_s == 0) return res;
  // qperf's rule: one side's count over its real time, or both over the mean of the two; for
  // msg_rate the one side's count goes over the *other* side's time.
  res.msg_rate = rate(l.r.msgs, r.r.msgs, res.rem_real_s, res.loc_real_s);
  res.send_bw = rate(l.s.bytes, r.s.bytes, res.loc_real_s, res.rem_real_s);
  res.recv_bw = rate(l.r.bytes, r.r.bytes, res.loc_real_s, res.rem_real_s);
  return res;
}

/// qperf's place_val: 3 significant digits, trailing zeros dropped, thousands with commas.
inline std::string qperf_number(double v) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.0f", v);
  int digits = 0;
  for (const char* p = b[0] == '-' ? b + 1 : b; *p >= '0' && *p <= '9'; ++p) ++digits;
  if (const int dec = 3 - digits; dec > 0) {
    std::snprintf(b, sizeof(b), "%.*f", dec, v);
    std::string s = b;
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  std::string s = b;
  for (int i = int(s.size()) - 3; i > (s[0] == '-' ? 1 : 0); i -= 3) s.insert(size_t(i), ",");
  return s;
}

}  // namespace uroce::apps::qperf
