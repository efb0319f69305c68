// Per-QP congestion control: the interface the engine drives, the "no CC"
// implementation, and the closed set of algorithms a QP can hold.
//
// Contract (STYLE 16-17): every algorithm is a pure class with no I/O and no
// clock; time comes in as now_ns (monotonic ns on the engine's clock). The
// engine, for each QP:
//   on_ack(bytes_acked, rtt_ns, now)  per ACK/completion; rtt_ns = 0 if the
//                                     ACK carries no RTT sample
//   on_cnp(now)                       per CNP received for the QP (DCQCN RP)
//   on_bytes_sent(bytes, now)         per packet transmitted (wire bytes)
//   on_timer(now)                     when now >= next_timer_ns()
//   rate_bps()                        after any of the above, into the Pacer
// ECN-CE itself is seen by the receiver, not by the sender: it goes to the
// notification point (CnpGenerator in cnp.h), which answers with CNPs that
// reach the sender's on_cnp. So there is no on_ecn_ce() at the sender.
//
// Dispatch: STYLE 4 forbids a virtual call per packet, and STYLE 13 forbids
// allocation on the data path. So an algorithm is a concrete final class
// satisfying the CongestionController concept, and a QP holds a
// CongestionControl by value: a std::variant of the known algorithms,
// dispatched by std::visit (a jump on the index, inlined bodies, no vtable,
// no heap). Adding an algorithm = one file + one variant alternative.
#pragma once

#include <concepts>
#include <cstdint>
#include <string_view>
#include <variant>

#include <uroce/status.h>

#include "stack/cc/dcqcn.h"
#include "stack/cc/timely.h"
#include "stack/cc/units.h"

namespace uroce::cc {

/// What every congestion-control algorithm provides. All calls are O(1)
/// amortised and never allocate.
template <typename T>
concept CongestionController = requires(T cc, const T ccc, uint64_t v) {
  { cc.on_ack(v, v, v) } -> std::same_as<void>;
  { cc.on_cnp(v) } -> std::same_as<void>;
  { cc.on_bytes_sent(v, v) } -> std::same_as<void>;
  { cc.on_timer(v) } -> std::same_as<void>;
  { ccc.next_timer_ns() } -> std::same_as<uint64_t>;
  { ccc.rate_bps() } -> std::same_as<uint64_t>;
  { ccc.line_rate_bps() } -> std::same_as<uint64_t>;
};

/// No congestion control: always the line rate, no timers.
class LineRate {
 public:
  explicit LineRate(uint64_t line_rate_bps) : line_bps_(line_rate_bps) {}
  void on_ack(uint64_t, uint64_t, uint64_t) {}
  void on_cnp(uint64_t) {}
  void on_bytes_sent(uint64_t, uint64_t) {}
  void on_timer(uint64_t) {}
  uint64_t next_timer_ns() const { return kNeverNs; }
  uint64_t rate_bps() const { return line_bps_; }
  uint64_t line_rate_bps() const { return line_bps_; }

 private:
  uint64_t line_bps_;
};

static_assert(CongestionController<LineRate>);
static_assert(CongestionController<Dcqcn>);
static_assert(CongestionController<Timely>);

/// Variant order: CcAlgorithm values (include/uroce/cc.h) are the variant indices.
using Algorithm = CcAlgorithm;

/// The congestion control of one QP, held by value in the QP.
class CongestionControl {
 public:
  using Variant = std::variant<LineRate, Dcqcn, Timely>;

  /// No congestion control: line rate.
  explicit CongestionControl(uint64_t line_rate_bps) : v_(LineRate(line_rate_bps)) {}
  explicit CongestionControl(const Dcqcn& d) : v_(d) {}
  explicit CongestionControl(const Timely& t) : v_(t) {}

  /// Factories that validate parameters (control path, at QP creation).
  static Result<CongestionControl> make_dcqcn(uint64_t line_rate_bps, const DcqcnParams& p) {
    if (Status s = validate(p, line_rate_bps); !s.ok()) return s;
    return CongestionControl(Dcqcn(line_rate_bps, p));
  }
  static Result<CongestionControl> make_timely(uint64_t line_rate_bps, const TimelyParams& p) {
    if (Status s = validate(p, line_rate_bps); !s.ok()) return s;
    return CongestionControl(Timely(line_rate_bps, p));
  }

  void on_ack(uint64_t bytes_acked, uint64_t rtt_ns, uint64_t now_ns) {
    std::visit([&](auto& a) { a.on_ack(bytes_acked, rtt_ns, now_ns); }, v_);
  }
  /// on_ack for a QP sprayed over several paths: TIMELY takes its gradient
  /// against prev_rtt_ns, the previous sample of the same path, and updates
  /// it; the other algorithms read no gradient and take it as on_ack.
  void on_path_ack(uint64_t bytes_acked, uint64_t rtt_ns, uint64_t now_ns, uint64_t& prev_rtt_ns) {
    if (auto* t = std::get_if<Timely>(&v_)) t->on_path_ack(bytes_acked, rtt_ns, now_ns, prev_rtt_ns);
    else on_ack(bytes_acked, rtt_ns, now_ns);
  }
  void on_cnp(uint64_t now_ns) {
    std::visit([&](auto& a) { a.on_cnp(now_ns); }, v_);
  }
  void on_bytes_sent(uint64_t bytes, uint64_t now_ns) {
    std::visit([&](auto& a) { a.on_bytes_sent(bytes, now_ns); }, v_);
  }
  void on_timer(uint64_t now_ns) {
    std::visit([&](auto& a) { a.on_timer(now_ns); }, v_);
  }
  uint64_t next_timer_ns() const {
    return std::visit([](const auto& a) { return a.next_timer_ns(); }, v_);
  }
  uint64_t rate_bps() const {
    return std::visit([](const auto& a) { return a.rate_bps(); }, v_);
  }
  uint64_t line_rate_bps() const {
    return std::visit([](const auto& a) { return a.line_rate_bps(); }, v_);
  }

  Algorithm algorithm() const { return Algorithm(v_.index()); }
  /// The concrete algorithm, or nullptr if the QP runs another one.
  template <typename T>
  T* get_if() { return std::get_if<T>(&v_); }
  template <typename T>
  const T* get_if() const { return std::get_if<T>(&v_); }

 private:
  Variant v_;
};

}  // namespace uroce::cc
