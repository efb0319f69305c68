// AETH syndrome encoding (IBA 9.7.5.1, Table 41-43): ACK with credit count,
// RNR NAK with a timer code, or NAK with an error code.
#pragma once

#include <cstdint>
#include <string_view>

namespace uroce::wire {

enum class AethType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };

enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};

/// Credit field value meaning "no credit information" (IBA 9.7.5.1.2; rxe sends it).
inline constexpr uint8_t kAethCreditsInvalid = 0x1f;

inline constexpr AethType aeth_type(uint8_t syndrome) { return AethType(syndrome >> 5); }
/// Credit count, RNR timer code or NAK code, by type.
inline constexpr uint8_t aeth_value(uint8_t syndrome) { return syndrome & 0x1f; }
inline constexpr uint8_t aeth_syndrome(AethType t, uint8_t value) {
  return uint8_t(uint8_t(t) << 5 | (value & 0x1f));
}
/// The syndrome of the ACKs uroce's responder sends: an ACK whose credit
/// field carries no credit information (IBA 9.7.5.1.2), as rxe's do.
inline constexpr uint8_t kAethAck = aeth_syndrome(AethType::kAck, kAethCreditsInvalid);

std::string_view nak_code_name(uint8_t code);

/// RNR NAK timer field to nanoseconds (IBA 9.7.5.2.8, Table 45): code 0 is 655.36 ms,
/// codes 1..31 run from 0.01 ms to 491.52 ms.
uint64_t rnr_timer_ns(uint8_t code);

}  // namespace uroce::wire
