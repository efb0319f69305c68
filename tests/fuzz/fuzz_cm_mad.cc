// libFuzzer target: CM MAD decode (stack/cm/mad.cc) and the rdma_cm
// private-data header (stack/cm/ip_cm.cc) on arbitrary bytes.
//
// Oracle, beyond "no crash, no out-of-bounds read", for every MAD that decodes:
//  1. encode(decode(b)) succeeds, and decode of that gives the same description
//     (the encode -> decode round trip, mad.h's "exact inverses").
//  2. encode(decode(b)) agrees with b on every bit the codec gives meaning to,
//     and is zero elsewhere (reserved bits are ignored by decode and written as
//     zero by encode, IBA 12.6). The meaningful bits of each message are found
//     independently of b: the round trip of an all-ones message (with the
//     length fields that must stay <= 72 tried at two values whose union covers
//     all their bits).
//  3. The same for the rdma_cm header at the start of REQ and SIDR_REQ private
//     data: encode(decode(h)) == h but for the reserved nibble, and re-decodes equal.
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "stack/cm/ip_cm.h"
#include "stack/cm/mad.h"

#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace uroce::cm;
using Bytes = std::array<uint8_t, kMadBytes>;

constexpr char kFuzzTarget[] = "fuzz_cm_mad";

constexpr size_t kRejInfoByte = kMadHdrBytes + offsetof(RejMsg, info_byte);
constexpr size_t kSidrInfoByte = kMadHdrBytes + offsetof(SidrRepMsg, info_length);

// Bits of a MAD with attribute attr that survive decode -> encode.
Bytes meaningful_bits(uint16_t attr) {
  Bytes mask{};
  const std::array<std::pair<size_t, uint8_t>, 5> variants = {{
      {0, 0xff},  // all ones, no override
      {kRejInfoByte, uint8_t(72 << kRejInfoLengthShift)},
      {kRejInfoByte, uint8_t(63 << kRejInfoLengthShift | 1)},
      {kSidrInfoByte, 72},
      {kSidrInfoByte, 63},
  }};
  for (const auto& [off, value] : variants) {
    Bytes b;
    b.fill(0xff);
    b[0] = kMgmtBaseVersion;
    b[1] = kMgmtClassCm;
    b[2] = kCmClassVersion;
    b[3] = kMadMethodSend;
    b[16] = uint8_t(attr >> 8);
    b[17] = uint8_t(attr);
    if (off) b[off] = value;
    CmMad m;
    if (decode(b, m) != CmError::kOk) continue;
    Bytes out{};
    if (encode(m, out) != CmError::kOk) uroce::fuzz::fail(kFuzzTarget, "encode of a decoded all-ones MAD");
    for (size_t i = 0; i < kMadBytes; ++i) mask[i] |= out[i];
  }
  return mask;
}

const Bytes& mask_for(uint16_t attr) {
  static std::array<Bytes, 0x20> masks;
  static std::array<bool, 0x20> done{};
  FUZZ_CHECK(attr < masks.size());
  if (!done[attr]) {
    masks[attr] = meaningful_bits(attr);
    done[attr] = true;
  }
  return masks[attr];
}

void check_cma_hdr(std::span<const uint8_t> private_data) {
  CmaHdrDesc h;
  if (decode_cma_hdr(private_data, h) != CmError::kOk) return;
  std::array<uint8_t, sizeof(CmaHdr)> out{};
  FUZZ_CHECK(encode_cma_hdr(h, out) == CmError::kOk);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t care = i == 1 ? uint8_t(0xf0) : uint8_t(0xff);  // byte 1: IPVersion:4 | resv:4
    FUZZ_CHECK((out[i] & care) == (private_data[i] & care) && (out[i] & ~care) == 0);
  }
  CmaHdrDesc back;
  FUZZ_CHECK(decode_cma_hdr(out, back) == CmError::kOk && back == h);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  MadHdrDesc hdr;
  const CmError he = decode_mad_hdr(in, hdr);
  FUZZ_CHECK((he == CmError::kOk) == (size >= kMadHdrBytes));
  check_cma_hdr(in);  // arbitrary bytes as private data, too

  CmMad m;
  const CmError e = decode(in, m);
  FUZZ_CHECK(!cm_error_name(e).empty());
  if (e != CmError::kOk) return 0;
  FUZZ_CHECK(size == kMadBytes && m.hdr == hdr);
  FUZZ_CHECK(uint16_t(cm_attr_of(m.body)) == m.hdr.attr_id);
  FUZZ_CHECK(!cm_attr_short_name(m.hdr.attr_id).empty());

  // 1. Round trip.
  Bytes out{};
  FUZZ_CHECK(encode(m, out) == CmError::kOk);
  FUZZ_CHECK(encode(m, std::span<uint8_t>(out.data(), kMadBytes - 1)) == CmError::kShort);
  CmMad back;
  FUZZ_CHECK(decode(out, back) == CmError::kOk);
  FUZZ_CHECK(back == m);

  // 2. Bit-exact where it matters, zero elsewhere.
  const Bytes& mask = mask_for(m.hdr.attr_id);
  for (size_t i = 0; i < kMadBytes; ++i) {
    FUZZ_CHECK(((out[i] ^ data[i]) & mask[i]) == 0);
    FUZZ_CHECK((out[i] & ~mask[i]) == 0);
  }

  // 3. The rdma_cm header in the private data of REQ and SIDR_REQ.
  if (const auto* req = std::get_if<ReqDesc>(&m.body)) check_cma_hdr(req->private_data);
  if (const auto* sreq = std::get_if<SidrReqDesc>(&m.body)) check_cma_hdr(sreq->private_data);
  return 0;
}
