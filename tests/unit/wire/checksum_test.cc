// Tests for stack/wire/checksum.h, the one Internet checksum: the worked
// example of RFC 1071 section 3, every IPv4 header of the bundled rdma_rxe
// captures (checksummed by the Linux kernel) verifying to zero, odd lengths,
// chaining, and sums long enough to need the 64-bit fold.
#include "stack/wire/checksum.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/wire/test_util.h"

namespace uroce::wire {
namespace {

// RFC 1071 3: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0x2ddf0, which folds
// to 0xddf2; the checksum is its complement, 0x220d.
TEST(Checksum, Rfc1071WorkedExample) {
  const uint8_t b[8] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(csum_partial(b), 0x2ddf0u);
  EXPECT_EQ(csum_finish(csum_partial(b)), 0x220d);
  // The same sum in two pieces of even length, and with the checksum appended.
  EXPECT_EQ(csum_finish(csum_partial({b + 4, 4}, csum_partial({b, 4}))), 0x220d);
  const uint8_t with[10] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7, 0x22, 0x0d};
  EXPECT_EQ(csum_finish(csum_partial(with)), 0);
}

TEST(Checksum, EveryCapturedIpv4HeaderVerifies) {
  size_t n = 0;
  for (const auto& f : test::captured_roce_frames()) {
    ASSERT_EQ(csum_finish(csum_partial({f.bytes.data() + test::kIpOff, 20})), 0) << f.where();
    ++n;
  }
  EXPECT_GT(n, 100u);
}

// An odd last byte counts as the high byte of a word padded with zero.
TEST(Checksum, OddLength) {
  const uint8_t b[3] = {0x12, 0x34, 0x56};
  EXPECT_EQ(csum_partial(b), 0x1234u + 0x5600u);
  EXPECT_EQ(csum_partial({b, 0}), 0u);
}

// 64 KiB of 0xff bytes: 32768 words of 0xffff, more than 32 bits of sum
// after adding a large carried-in sum; 0xffff is negative zero, so the
// complement is 0 whatever the count.
TEST(Checksum, LongSumsFoldCorrectly) {
  const std::vector<uint8_t> ones(65536, 0xff);
  EXPECT_EQ(csum_finish(csum_partial(ones)), 0);
  EXPECT_EQ(csum_finish(csum_partial(ones, 0xffffffffu)), 0);
  std::vector<uint8_t> words(65536);
  for (size_t i = 0; i < words.size(); i += 2) words[i + 1] = 1;  // 32768 words of 1
  EXPECT_EQ(csum_finish(csum_partial(words)), uint16_t(~uint16_t(32768)));
}

}  // namespace
}  // namespace uroce::wire
