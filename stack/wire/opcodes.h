// The opcode table: one constexpr entry per BTH opcode (IBA 9.2.1 Table 38,
// A17.9.2 for CNP) saying which extension headers follow the BTH and where,
// how the packet sits in a message (first/middle/last/only), whether it is a
// request or a response, carries payload, consumes a receive WQE or asks for an
// ACK. Header lengths, payload offsets and sequencing are derived from it.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace uroce::wire {

// Extension headers, in the order the spec places them after the BTH (IBA 9.2).
enum class Hdr : uint8_t {
  kDeth,
  kReth,
  kAtomicEth,
  kAeth,
  kAtomicAckEth,
  kImmDt,
  kIeth,
  kCnp,
  kCount,
};

enum OpFlags : uint32_t {
  kReq = 1u << 0,       // a request (goes to the responder)
  kResp = 1u << 1,      // a response or ACK (goes to the requester's completer)
  kFirst = 1u << 2,
  kMiddle = 1u << 3,
  kLast = 1u << 4,
  kOnly = kFirst | kLast,
  kPayload = 1u << 5,   // may carry payload
  kSend = 1u << 6,
  kWrite = 1u << 7,
  kRead = 1u << 8,      // READ request or READ response
  kAtomic = 1u << 9,    // atomic request or atomic ACK
  kImm = 1u << 10,      // carries ImmDt
  kInv = 1u << 11,      // carries IETH
  kRwr = 1u << 12,      // consumes a receive WQE at the responder
  kRc = 1u << 13,
  kUc = 1u << 14,
  kUd = 1u << 15,
  kCnpOp = 1u << 16,
  kValid = 1u << 17,
};

struct OpcodeInfo {
  std::string_view name;  // as Wireshark's InfiniBand dissector names it
  uint32_t flags = 0;
  uint8_t hdr_len = 0;    // BTH + extension headers, bytes
  std::array<uint8_t, size_t(Hdr::kCount)> off{};  // offset from the BTH; 0 = absent
  bool has(Hdr h) const { return off[size_t(h)] != 0; }
};

inline constexpr uint8_t kOpcodeCnp = 0x81;

// Named opcodes the transport uses (IBA Table 38).
enum Opcode : uint8_t {
  kRcSendFirst = 0x00,
  kRcSendMiddle = 0x01,
  kRcSendLast = 0x02,
  kRcSendLastImm = 0x03,
  kRcSendOnly = 0x04,
  kRcSendOnlyImm = 0x05,
  kRcWriteFirst = 0x06,
  kRcWriteMiddle = 0x07,
  kRcWriteLast = 0x08,
  kRcWriteLastImm = 0x09,
  kRcWriteOnly = 0x0a,
  kRcWriteOnlyImm = 0x0b,
  kRcReadRequest = 0x0c,
  kRcReadResponseFirst = 0x0d,
  kRcReadResponseMiddle = 0x0e,
  kRcReadResponseLast = 0x0f,
  kRcReadResponseOnly = 0x10,
  kRcAcknowledge = 0x11,
  kRcAtomicAcknowledge = 0x12,
  kRcCompareSwap = 0x13,
  kRcFetchAdd = 0x14,
  kRcSendLastInv = 0x16,
  kRcSendOnlyInv = 0x17,
  kUcSendFirst = 0x20,
  kUcSendMiddle = 0x21,
  kUcSendLast = 0x22,
  kUcSendLastImm = 0x23,
  kUcSendOnly = 0x24,
  kUcSendOnlyImm = 0x25,
  kUcWriteFirst = 0x26,
  kUcWriteMiddle = 0x27,
  kUcWriteLast = 0x28,
  kUcWriteLastImm = 0x29,
  kUcWriteOnly = 0x2a,
  kUcWriteOnlyImm = 0x2b,
  kUdSendOnly = 0x64,
  kUdSendOnlyImm = 0x65,
  kCnp = kOpcodeCnp,
};

/// Transport service of an opcode: the top three bits (IBA 9.2.1).
inline constexpr uint8_t kOpServiceRc = 0x00;
inline constexpr uint8_t kOpServiceUc = 0x20;
inline constexpr uint8_t kOpServiceUd = 0x60;

extern const std::array<OpcodeInfo, 256> kOpcodes;

inline const OpcodeInfo& opcode_info(uint8_t opcode) { return kOpcodes[opcode]; }

}  // namespace uroce::wire
