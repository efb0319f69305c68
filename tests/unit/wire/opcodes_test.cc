// Tests for stack/wire/opcodes.cc: all 256 entries of kOpcodes against IBA
// Vol 1 9.2.1 Table 38 (and A17.9.2 for CNP), re-typed here by hand from the
// spec, plus the table's internal consistency rules.
#include "stack/wire/opcodes.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stack/wire/headers.h"

namespace uroce::wire {
namespace {

enum Pos { kPosFirst, kPosMiddle, kPosLast, kPosOnly };
enum Dir { kDirReq, kDirResp, kDirNeither };

struct Expected {
  uint8_t opcode;
  std::vector<Hdr> hdrs;  // extension headers after the BTH, in order
  Pos pos;
  Dir dir;
  bool payload;
  bool rwr;  // consumes a receive WQE at the responder
};

// IBA Table 38, typed from the spec (not generated from the code under test).
// The SEND/WRITE rows are the same for RC (0x00) and UC (0x20).
std::vector<Expected> table38() {
  using H = Hdr;
  std::vector<Expected> v;
  for (const uint8_t base : {uint8_t(0x00), uint8_t(0x20)}) {
    v.push_back({uint8_t(base + 0x00), {}, kPosFirst, kDirReq, true, false});                 // SEND First
    v.push_back({uint8_t(base + 0x01), {}, kPosMiddle, kDirReq, true, false});                // SEND Middle
    v.push_back({uint8_t(base + 0x02), {}, kPosLast, kDirReq, true, true});                   // SEND Last
    v.push_back({uint8_t(base + 0x03), {H::kImmDt}, kPosLast, kDirReq, true, true});          // SEND Last Imm
    v.push_back({uint8_t(base + 0x04), {}, kPosOnly, kDirReq, true, true});                   // SEND Only
    v.push_back({uint8_t(base + 0x05), {H::kImmDt}, kPosOnly, kDirReq, true, true});          // SEND Only Imm
    v.push_back({uint8_t(base + 0x06), {H::kReth}, kPosFirst, kDirReq, true, false});         // WRITE First
    v.push_back({uint8_t(base + 0x07), {}, kPosMiddle, kDirReq, true, false});                // WRITE Middle
    v.push_back({uint8_t(base + 0x08), {}, kPosLast, kDirReq, true, false});                  // WRITE Last
    v.push_back({uint8_t(base + 0x09), {H::kImmDt}, kPosLast, kDirReq, true, true});          // WRITE Last Imm
    v.push_back({uint8_t(base + 0x0a), {H::kReth}, kPosOnly, kDirReq, true, false});          // WRITE Only
    v.push_back({uint8_t(base + 0x0b), {H::kReth, H::kImmDt}, kPosOnly, kDirReq, true, true});  // WRITE Only Imm
  }
  v.push_back({0x0c, {H::kReth}, kPosOnly, kDirReq, false, false});                       // READ Request
  v.push_back({0x0d, {H::kAeth}, kPosFirst, kDirResp, true, false});                      // READ Response First
  v.push_back({0x0e, {}, kPosMiddle, kDirResp, true, false});                             // READ Response Middle
  v.push_back({0x0f, {H::kAeth}, kPosLast, kDirResp, true, false});                       // READ Response Last
  v.push_back({0x10, {H::kAeth}, kPosOnly, kDirResp, true, false});                       // READ Response Only
  v.push_back({0x11, {H::kAeth}, kPosOnly, kDirResp, false, false});                      // Acknowledge
  v.push_back({0x12, {H::kAeth, H::kAtomicAckEth}, kPosOnly, kDirResp, false, false});    // ATOMIC Acknowledge
  v.push_back({0x13, {H::kAtomicEth}, kPosOnly, kDirReq, false, false});                  // CmpSwap
  v.push_back({0x14, {H::kAtomicEth}, kPosOnly, kDirReq, false, false});                  // FetchAdd
  v.push_back({0x16, {H::kIeth}, kPosLast, kDirReq, true, true});                         // SEND Last Invalidate
  v.push_back({0x17, {H::kIeth}, kPosOnly, kDirReq, true, true});                         // SEND Only Invalidate
  v.push_back({0x64, {H::kDeth}, kPosOnly, kDirReq, true, true});                         // UD SEND Only
  v.push_back({0x65, {H::kDeth, H::kImmDt}, kPosOnly, kDirReq, true, true});              // UD SEND Only Imm
  v.push_back({0x81, {H::kCnp}, kPosOnly, kDirNeither, false, false});                    // CNP (A17.9.2)
  return v;
}

// Header sizes from IBA 9.3 (BTH 12, DETH 8, RETH 16, AtomicETH 28, AETH 4,
// AtomicAckETH 8, ImmDt 4, IETH 4) and A17.9.2 (CNP: 16 reserved bytes).
size_t spec_size(Hdr h) {
  switch (h) {
    case Hdr::kDeth: return 8;
    case Hdr::kReth: return 16;
    case Hdr::kAtomicEth: return 28;
    case Hdr::kAeth: return 4;
    case Hdr::kAtomicAckEth: return 8;
    case Hdr::kImmDt: return 4;
    case Hdr::kIeth: return 4;
    case Hdr::kCnp: return 16;
    case Hdr::kCount: break;
  }
  return 0;
}

uint32_t pos_flags(Pos p) {
  switch (p) {
    case kPosFirst: return kFirst;
    case kPosMiddle: return kMiddle;
    case kPosLast: return kLast;
    case kPosOnly: return kFirst | kLast;
  }
  return 0;
}

TEST(Opcodes, IBA_Table38_ValidEntriesAreExactlyTheSpecOpcodes) {
  // Receive: all 256 opcode values.
  // Expect: valid exactly for the Table 38 opcodes RoCE uses (RC, UC, UD) and
  //   CNP 0x81; everything else (reserved 0x15, 0x18-0x1f, RD 0x40-0x5f,
  //   manufacturer-specific 0xc0-0xff, ...) invalid with an empty entry.
  //   (RC FLUSH 0x1c / ATOMIC WRITE 0x1d from the later memory-placement
  //   annex are not implemented and so are invalid too.)
  std::map<uint8_t, Expected> want;
  for (const Expected& e : table38()) want.emplace(e.opcode, e);
  ASSERT_EQ(want.size(), 12u * 2 + 11 + 2 + 1);
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& info = kOpcodes[size_t(op)];
    SCOPED_TRACE(op);
    const bool spec = want.count(uint8_t(op)) != 0;
    EXPECT_EQ((info.flags & kValid) != 0, spec);
    if (!spec) {
      EXPECT_EQ(info.flags, 0u);
      EXPECT_EQ(info.hdr_len, 0u);
      EXPECT_TRUE(info.name.empty());
    } else {
      EXPECT_FALSE(info.name.empty());
    }
  }
  EXPECT_TRUE(kOpcodes[kOpcodeCnp].flags & kValid);
  EXPECT_TRUE(kOpcodes[kOpcodeCnp].flags & kCnpOp);
}

TEST(Opcodes, IBA_Table38_HeadersPositionAndDirectionMatchTheSpec) {
  // Receive: each Table 38 opcode.
  // Expect: exactly the spec's extension headers, laid out after the 12-byte
  //   BTH in spec order with the spec sizes (so hdr_len = 12 + their sum),
  //   the spec's first/middle/last/only position, request or response,
  //   payload, receive-WQE use, immediate and invalidate flags, and the
  //   service bits of the opcode (RC 0x00, UC 0x20, UD 0x60).
  for (const Expected& e : table38()) {
    const OpcodeInfo& info = kOpcodes[e.opcode];
    SCOPED_TRACE(std::string(info.name) + " " + std::to_string(e.opcode));
    size_t off = 12;
    std::vector<bool> present(size_t(Hdr::kCount), false);
    for (const Hdr h : e.hdrs) {
      present[size_t(h)] = true;
      EXPECT_EQ(info.off[size_t(h)], off) << "header " << int(h);
      off += spec_size(h);
    }
    for (size_t h = 0; h < size_t(Hdr::kCount); ++h) EXPECT_EQ(info.has(Hdr(h)), present[h]) << "header " << h;
    EXPECT_EQ(info.hdr_len, off);
    EXPECT_EQ(info.flags & (kFirst | kMiddle | kLast), pos_flags(e.pos));
    EXPECT_EQ((info.flags & kReq) != 0, e.dir == kDirReq);
    EXPECT_EQ((info.flags & kResp) != 0, e.dir == kDirResp);
    EXPECT_EQ((info.flags & kPayload) != 0, e.payload);
    EXPECT_EQ((info.flags & kRwr) != 0, e.rwr);
    EXPECT_EQ((info.flags & kImm) != 0, present[size_t(Hdr::kImmDt)]);
    EXPECT_EQ((info.flags & kInv) != 0, present[size_t(Hdr::kIeth)]);
    EXPECT_EQ((info.flags & kAtomic) != 0, e.opcode == 0x12 || e.opcode == 0x13 || e.opcode == 0x14);
    EXPECT_EQ((info.flags & kRead) != 0, e.opcode >= 0x0c && e.opcode <= 0x10);
    if (e.opcode == 0x81) continue;
    const uint8_t service = e.opcode & 0xe0;
    EXPECT_EQ((info.flags & kRc) != 0, service == kOpServiceRc);
    EXPECT_EQ((info.flags & kUc) != 0, service == kOpServiceUc);
    EXPECT_EQ((info.flags & kUd) != 0, service == kOpServiceUd);
  }
}

TEST(Opcodes, TableIsSelfConsistentForAll256Entries) {
  // Receive: all 256 entries.
  // Expect, for every valid one: hdr_len == 12 + the sizes of the headers
  //   present (struct sizes from headers.h); offsets strictly increasing in
  //   Hdr (spec) order, each header ending where the next begins; exactly one
  //   of first / middle / last / only; kRwr only on requests; never both
  //   request and response; the opcode service matches its service flag.
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& info = kOpcodes[size_t(op)];
    if (!(info.flags & kValid)) continue;
    SCOPED_TRACE(info.name);
    const size_t sizes[] = {sizeof(Deth), sizeof(Reth), sizeof(AtomicEth), sizeof(Aeth),
                            sizeof(AtomicAckEth), sizeof(ImmDt), sizeof(Ieth), sizeof(CnpBody)};
    static_assert(std::size(sizes) == size_t(Hdr::kCount));
    size_t next = sizeof(Bth);
    for (size_t h = 0; h < size_t(Hdr::kCount); ++h) {
      if (!info.has(Hdr(h))) continue;
      EXPECT_EQ(info.off[h], next) << "header " << h;
      EXPECT_EQ(sizes[h], spec_size(Hdr(h)));
      next = info.off[h] + sizes[h];
    }
    EXPECT_EQ(info.hdr_len, next);
    const uint32_t pos = info.flags & (kFirst | kMiddle | kLast);
    EXPECT_TRUE(pos == kFirst || pos == kMiddle || pos == kLast || pos == kOnly) << pos;
    if (info.flags & kRwr) {
      EXPECT_TRUE(info.flags & kReq);
    }
    EXPECT_FALSE((info.flags & kReq) && (info.flags & kResp));
    if (info.flags & kCnpOp) continue;
    EXPECT_TRUE((info.flags & kReq) || (info.flags & kResp));
    const int services = !!(info.flags & kRc) + !!(info.flags & kUc) + !!(info.flags & kUd);
    EXPECT_EQ(services, 1);
  }
}

TEST(Opcodes, NamedEnumValuesAreTable38Codes) {
  // Receive: the named opcode constants. Expect: the Table 38 binary codes.
  EXPECT_EQ(kRcSendFirst, 0b000'00000);
  EXPECT_EQ(kRcSendOnly, 0b000'00100);
  EXPECT_EQ(kRcWriteFirst, 0b000'00110);
  EXPECT_EQ(kRcWriteOnlyImm, 0b000'01011);
  EXPECT_EQ(kRcReadRequest, 0b000'01100);
  EXPECT_EQ(kRcReadResponseFirst, 0b000'01101);
  EXPECT_EQ(kRcReadResponseOnly, 0b000'10000);
  EXPECT_EQ(kRcAcknowledge, 0b000'10001);
  EXPECT_EQ(kRcAtomicAcknowledge, 0b000'10010);
  EXPECT_EQ(kRcCompareSwap, 0b000'10011);
  EXPECT_EQ(kRcFetchAdd, 0b000'10100);
  EXPECT_EQ(kRcSendLastInv, 0b000'10110);
  EXPECT_EQ(kRcSendOnlyInv, 0b000'10111);
  EXPECT_EQ(kUcSendFirst, 0b001'00000);
  EXPECT_EQ(kUcWriteOnlyImm, 0b001'01011);
  EXPECT_EQ(kUdSendOnly, 0b011'00100);
  EXPECT_EQ(kUdSendOnlyImm, 0b011'00101);
  EXPECT_EQ(kCnp, 0b100'00001);
  EXPECT_EQ(kOpServiceUd, 0b011'00000);
}

TEST(Opcodes, NamesAreUniqueAndCarryTheService) {
  // Receive: the names of all valid entries.
  // Expect: unique, and prefixed "RC ", "UC " or "UD " by service (CNP aside),
  //   as Wireshark names them (tests/tools/tshark_compare.py checks the rest).
  std::map<std::string_view, int> seen;
  for (int op = 0; op < 256; ++op) {
    const OpcodeInfo& info = kOpcodes[size_t(op)];
    if (!(info.flags & kValid)) continue;
    EXPECT_TRUE(seen.emplace(info.name, op).second) << info.name;
    if (info.flags & kCnpOp) continue;
    const std::string_view prefix = info.flags & kRc ? "RC " : info.flags & kUc ? "UC " : "UD ";
    EXPECT_EQ(info.name.substr(0, 3), prefix) << info.name;
  }
}

}  // namespace
}  // namespace uroce::wire
