// Seam for congestion control (issue 8): the requester asks its QP's pacer
// before each packet and reports what it sent. This version never holds a
// packet back; DCQCN and friends (stack/cc/) will decide here from the rates
// they compute, with time injected as now_ns.
#pragma once

#include <cstdint>

namespace uroce::transport {

class Pacer {
 public:
  /// True if a frame of `bytes` may leave at now_ns.
  bool may_send(uint64_t /*now_ns*/, uint32_t /*bytes*/) const { return true; }
  void on_sent(uint64_t /*now_ns*/, uint32_t /*bytes*/) {}
};

}  // namespace uroce::transport
