// uroce's negotiated transport extension on RC (QpAttr::ext, docs/LOSS_RECOVERY.md
// "Wire format"): the placement header at the start of the payload of every
// SEND/WRITE packet of a selective-repeat QP, and the SACK block after the
// AETH of its Acknowledges. Both ride inside an ordinary RoCEv2 packet under
// its ICRC, so a standard dissector sees plain RoCE: a payload that starts
// with the placement header, an Acknowledge with payload bytes.
#pragma once

#include <cstdint>
#include <span>

#include "stack/wire/byte_order.h"

namespace uroce::wire {

/// Placement header (24 bytes): where a SEND/WRITE packet's data goes without
/// its message's First: word0 = 'S' (0x53) << 24 | the message's first PSN,
/// the message length, the WRITE's remote VA and R_Key (zero for SEND), and
/// the sequence number of the receive WQE the message consumes (SEND, WRITE
/// with immediate; zero for a plain WRITE).
struct PlaceHdr {
  be32 magic_first_psn;
  be32 msg_len;
  be64 va;
  be32 rkey;
  be32 recv_seq;
};
static_assert(sizeof(PlaceHdr) == 24 && alignof(PlaceHdr) == 1);
inline constexpr uint32_t kPlaceHdrBytes = sizeof(PlaceHdr);
inline constexpr uint8_t kPlaceMagic = 0x53;  // 'S'

/// The decoded placement header.
struct Placement {
  uint32_t first_psn = 0;
  uint32_t msg_len = 0;
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t recv_seq = 0;
};

inline void write_placement(const Placement& p, uint8_t* out) {
  auto* h = reinterpret_cast<PlaceHdr*>(out);
  h->magic_first_psn.set(uint32_t(kPlaceMagic) << 24 | (p.first_psn & 0x00ffffff));
  h->msg_len.set(p.msg_len);
  h->va.set(p.va);
  h->rkey.set(p.rkey);
  h->recv_seq.set(p.recv_seq);
}

/// Decodes the placement header at the start of payload; false if the
/// payload is shorter or does not start with the magic byte.
inline bool read_placement(std::span<const uint8_t> payload, Placement& p) {
  if (payload.size() < kPlaceHdrBytes) return false;
  const auto* h = reinterpret_cast<const PlaceHdr*>(payload.data());
  const uint32_t w = h->magic_first_psn.get();
  if (w >> 24 != kPlaceMagic) return false;
  p = Placement{w & 0x00ffffff, h->msg_len.get(), h->va.get(), h->rkey.get(), h->recv_seq.get()};
  return true;
}

/// SACK block after the AETH of an RC Acknowledge: kind (1), reserved (0),
/// bitmap bytes (a multiple of 4, 4..kSackMaxBitmapBytes), then the bitmap.
/// Bit i (byte i / 8, bit i % 8 from the least significant) stands for PSN
/// BTH.PSN + 1 + i: set if the responder holds that PSN. Bit 0, the first PSN
/// the cumulative acknowledgement does not cover, is always clear.
struct SackHdr {
  uint8_t kind;
  uint8_t reserved;
  be16 bitmap_bytes;
};
static_assert(sizeof(SackHdr) == 4 && alignof(SackHdr) == 1);
inline constexpr uint8_t kSackKind = 1;
inline constexpr uint32_t kSackMaxBitmapBytes = 128;  // 1024 PSNs: the requester's window

/// True if bytes (an Acknowledge's payload) are exactly one well-formed SACK block.
inline bool is_sack_block(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(SackHdr) + 4) return false;
  const auto* h = reinterpret_cast<const SackHdr*>(bytes.data());
  const uint32_t n = h->bitmap_bytes.get();
  return h->kind == kSackKind && h->reserved == 0 && n % 4 == 0 && n >= 4 && n <= kSackMaxBitmapBytes &&
         bytes.size() == sizeof(SackHdr) + n;
}

/// The bitmap of a block is_sack_block accepted.
inline std::span<const uint8_t> sack_bitmap(std::span<const uint8_t> block) { return block.subspan(sizeof(SackHdr)); }

}  // namespace uroce::wire
