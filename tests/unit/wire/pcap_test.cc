// Tests for stack/wire/pcap.cc: writer/reader round trip, both byte orders and
// timestamp resolutions, and clean errors on truncated, garbage, pcapng and
// empty files (https://www.tcpdump.org/manpages/pcap-savefile.5.html).
#include "stack/wire/pcap.h"

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/wire/test_util.h"

namespace uroce::wire {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::write_file;

uint32_t le32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t(b[at]) | uint32_t(b[at + 1]) << 8 | uint32_t(b[at + 2]) << 16 | uint32_t(b[at + 3]) << 24;
}

class PcapTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("pcap"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(PcapTest, WriterThenReaderRoundTripsFramesAndNanosecondStamps) {
  // Receive: three frames (0, 60 and 9000 bytes) written with PcapWriter at
  //   stamps with nanosecond detail, then read back with read_pcap.
  // Expect: the same bytes, lengths and stamps; the file header says
  //   nanosecond magic 0xa1b23c4d, version 2.4, link type 1 (Ethernet).
  std::vector<std::vector<uint8_t>> frames = {{}, std::vector<uint8_t>(60), std::vector<uint8_t>(9000)};
  std::mt19937 rng(3);
  for (auto& f : frames) {
    for (auto& b : f) b = uint8_t(rng());
  }
  const uint64_t stamps[] = {0, 1'000'000'001, 1'796'000'273'921'906'123};
  {
    PcapWriter w;
    ASSERT_TRUE(w.open(path("rt.pcap")).ok());
    for (size_t i = 0; i < frames.size(); ++i) w.write(frames[i], stamps[i]);
  }
  const std::vector<uint8_t> raw = read_file(path("rt.pcap"));
  ASSERT_GE(raw.size(), 24u);
  EXPECT_EQ(le32(raw, 0), 0xa1b23c4du);
  EXPECT_EQ(raw[4] | raw[5] << 8, 2);
  EXPECT_EQ(raw[6] | raw[7] << 8, 4);
  EXPECT_EQ(le32(raw, 20), 1u);
  EXPECT_EQ(raw.size(), 24 + 3 * 16 + 0 + 60 + 9000u);

  auto recs = read_pcap(path("rt.pcap"));
  ASSERT_TRUE(recs.ok()) << recs.status().message();
  ASSERT_EQ(recs->size(), frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ((*recs)[i].data, frames[i]);
    EXPECT_EQ((*recs)[i].orig_len, frames[i].size());
    EXPECT_EQ((*recs)[i].time_ns, stamps[i]);
  }
}

TEST_F(PcapTest, HeldCaptureReachesTheFileAtCloseInOrder) {
  // Receive: a writer opened with hold_bytes 1 MiB writes 100 frames of
  //   1000 bytes (stdio's own buffer, BUFSIZ, holds 8); the same writer,
  //   opened again with hold_bytes 4096, writes a 60-byte frame, a 9000-byte
  //   one (bigger than the buffer) and another 60-byte one.
  // Expect: the first file empty until close, then all 100 frames; the
  //   second read back whole and in order.
  PcapWriter w;
  ASSERT_TRUE(w.open(path("held.pcap"), 65535, 1 << 20).ok());
  for (int i = 0; i < 100; ++i) w.write(std::vector<uint8_t>(1000, uint8_t(i)), uint64_t(i));
  EXPECT_EQ(fs::file_size(path("held.pcap")), 0u);
  ASSERT_TRUE(w.close().ok());
  auto held = read_pcap(path("held.pcap"));
  ASSERT_TRUE(held.ok()) << held.status().message();
  ASSERT_EQ(held->size(), 100u);
  EXPECT_EQ((*held)[99].data, std::vector<uint8_t>(1000, 99));

  const std::vector<uint8_t> a(60, 0x11), big(9000, 0x22), c(60, 0x33);
  ASSERT_TRUE(w.open(path("again.pcap"), 65535, 4096).ok());
  w.write(a, 1);
  w.write(big, 2);
  w.write(c, 3);
  ASSERT_TRUE(w.close().ok());
  auto again = read_pcap(path("again.pcap"));
  ASSERT_TRUE(again.ok()) << again.status().message();
  ASSERT_EQ(again->size(), 3u);
  EXPECT_EQ((*again)[0].data, a);
  EXPECT_EQ((*again)[1].data, big);
  EXPECT_EQ((*again)[2].data, c);
}

TEST_F(PcapTest, WriterTruncatesToSnaplenAndKeepsOrigLen) {
  // Receive: a 100-byte frame written with snaplen 64.
  // Expect: 64 bytes captured, orig_len 100.
  {
    PcapWriter w;
    ASSERT_TRUE(w.open(path("snap.pcap"), 64).ok());
    w.write(std::vector<uint8_t>(100, 0xab), 5);
  }
  auto recs = read_pcap(path("snap.pcap"));
  ASSERT_TRUE(recs.ok());
  ASSERT_EQ(recs->size(), 1u);
  EXPECT_EQ((*recs)[0].data, std::vector<uint8_t>(64, 0xab));
  EXPECT_EQ((*recs)[0].orig_len, 100u);
}

TEST_F(PcapTest, AFullDiskMakesCloseReportTheCaptureIncomplete) {
  // Receive: 100 frames of 1000 bytes written to /dev/full (every write
  //   fails with ENOSPC once stdio flushes its buffer), then close; and one
  //   60-byte frame, which stdio holds until close's flush fails.
  // Expect: close() is kDataLoss naming the file and the error, with the
  //   frames offered after the first failure counted; not ok, never silent.
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  PcapWriter w;
  ASSERT_TRUE(w.open("/dev/full").ok());
  for (int i = 0; i < 100; ++i) w.write(std::vector<uint8_t>(1000, 0x5a), uint64_t(i));
  const Status s = w.close();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  const std::string m = s.message();
  EXPECT_NE(m.find("capture /dev/full is incomplete (No space left on device)"), std::string::npos) << m;
  EXPECT_NE(m.find("frames and more not written"), std::string::npos) << m;
  EXPECT_GE(std::stoul(m.substr(m.find("): ") + 3)), 90u) << m;  // BUFSIZ (8 KB) holds 8 frames

  ASSERT_TRUE(w.open("/dev/full").ok());
  w.write(std::vector<uint8_t>(60, 0x5a), 1);
  const Status t = w.close();
  EXPECT_EQ(t.code(), StatusCode::kDataLoss);
  EXPECT_NE(std::string(t.message()).find("its last frames were not written"), std::string::npos) << t.message();
  EXPECT_TRUE(w.close().ok());  // closed: nothing more to report
}

TEST_F(PcapTest, ReadsCapturedMicrosecondFileAndItsBigEndianTwin) {
  // Receive: a bundled capture (little-endian, microsecond magic 0xa1b2c3d4,
  //   as QEMU's filter-dump writes) and the same file with every header field
  //   byte-swapped by hand (the big-endian form).
  // Expect: the same records from both, with stamps in nanoseconds.
  const fs::path src = fs::path(UROCE_TEST_DATA_DIR) / "rxe-rc-pingpong-send.pcap";
  std::vector<uint8_t> le = read_file(src);
  ASSERT_EQ(le32(le, 0), 0xa1b2c3d4u);
  std::vector<uint8_t> be = le;
  auto swap4 = [&](size_t at) { std::swap(be[at], be[at + 3]), std::swap(be[at + 1], be[at + 2]); };
  auto swap2 = [&](size_t at) { std::swap(be[at], be[at + 1]); };
  swap4(0), swap2(4), swap2(6), swap4(8), swap4(12), swap4(16), swap4(20);
  for (size_t at = 24; at < be.size();) {
    const uint32_t incl = le32(le, at + 8);
    for (size_t k = 0; k < 4; ++k) swap4(at + 4 * k);
    at += 16 + incl;
  }
  write_file(path("be.pcap"), be);
  auto a = read_pcap(src.string());
  auto b = read_pcap(path("be.pcap"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(a->size(), b->size());
  ASSERT_FALSE(a->empty());
  const uint64_t first_us = uint64_t(le32(le, 24)) * 1'000'000 + le32(le, 28);
  EXPECT_EQ((*a)[0].time_ns, first_us * 1000);
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].data, (*b)[i].data);
    EXPECT_EQ((*a)[i].time_ns, (*b)[i].time_ns);
    EXPECT_EQ((*a)[i].orig_len, (*b)[i].orig_len);
  }
}

TEST_F(PcapTest, TruncatedFilesAreDataLossWhereverTheyAreCut) {
  // Receive: a bundled capture cut at every length up to the end of its
  //   second record, and around every later record boundary (one byte before,
  //   on, after, inside the record header, just after it): cuts inside the file
  //   header, a record header, or a record's bytes.
  // Expect: kDataLoss for every cut that is not on a record boundary; a cut
  //   exactly on a boundary after the file header is a valid, shorter file.
  const std::vector<uint8_t> whole = read_file(fs::path(UROCE_TEST_DATA_DIR) / "rxe-uc-pingpong-send.pcap");
  std::vector<size_t> boundaries = {24};
  for (size_t at = 24; at < whole.size();) {
    at += 16 + le32(whole, at + 8);
    boundaries.push_back(at);
  }
  ASSERT_EQ(boundaries.back(), whole.size());
  ASSERT_GE(boundaries.size(), 4u);
  std::set<size_t> cuts;
  for (size_t len = 0; len <= boundaries[2]; ++len) cuts.insert(len);
  for (const size_t b : boundaries) {
    for (const size_t d : {size_t(0), size_t(1), size_t(8), size_t(15), size_t(16), size_t(17)}) cuts.insert(b + d);
    cuts.insert(b - 1);
  }
  size_t checked = 0;
  for (const size_t len : cuts) {
    if (len >= whole.size()) continue;
    write_file(path("cut.pcap"), std::vector<uint8_t>(whole.begin(), whole.begin() + long(len)));
    auto r = read_pcap(path("cut.pcap"));
    const auto it = std::find(boundaries.begin(), boundaries.end(), len);
    if (it != boundaries.end()) {
      ASSERT_TRUE(r.ok()) << "cut at " << len;
      EXPECT_EQ(r->size(), size_t(it - boundaries.begin()));
    } else {
      ASSERT_FALSE(r.ok()) << "cut at " << len;
      EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << "cut at " << len;
    }
    ++checked;
  }
  EXPECT_GT(checked, boundaries[2]);
}

TEST_F(PcapTest, EmptyGarbagePcapngAndMissingFilesAreErrors) {
  // Receive: an empty file; 4 KiB of seeded random bytes; a pcapng Section
  //   Header Block; a pcap header with link type 113 (Linux cooked); a record
  //   claiming 1 GiB; a record longer than the file's snap length (in both
  //   byte orders); a path that does not exist.
  // Expect: an error status for each (kDataLoss, or kInvalidArgument for the
  //   link type, kNotFound for the missing file), never a crash.
  write_file(path("empty.pcap"), {});
  EXPECT_EQ(read_pcap(path("empty.pcap")).status().code(), StatusCode::kDataLoss);

  std::vector<uint8_t> junk(4096);
  std::mt19937 rng(11);
  for (auto& b : junk) b = uint8_t(rng());
  write_file(path("junk.pcap"), junk);
  EXPECT_EQ(read_pcap(path("junk.pcap")).status().code(), StatusCode::kDataLoss);

  // pcapng SHB: type 0x0A0D0D0A, length 28, byte-order magic 0x1A2B3C4D, v1.0.
  const std::vector<uint8_t> shb = {0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0,
                                    0,    0,    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 28, 0, 0, 0};
  write_file(path("ng.pcapng"), shb);
  EXPECT_EQ(read_pcap(path("ng.pcapng")).status().code(), StatusCode::kDataLoss);

  std::vector<uint8_t> cooked = {0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0,
                                 0,    0,    0,    0,    0xff, 0xff, 0, 0, 113, 0, 0, 0};
  write_file(path("cooked.pcap"), cooked);
  EXPECT_EQ(read_pcap(path("cooked.pcap")).status().code(), StatusCode::kInvalidArgument);

  std::vector<uint8_t> huge = cooked;
  huge[20] = 1;  // Ethernet
  const uint8_t rec[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0x40};  // incl = orig = 1 GiB
  huge.insert(huge.end(), rec, rec + 16);
  write_file(path("huge.pcap"), huge);
  EXPECT_EQ(read_pcap(path("huge.pcap")).status().code(), StatusCode::kDataLoss);

  // A 100-byte record in files whose snap length is 64, little- and big-endian.
  const std::vector<uint8_t> le_snap64 = {0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0,
                                          0,    0,    0,    0,    64, 0, 0, 0, 1, 0, 0, 0};
  const std::vector<uint8_t> be_snap64 = {0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4, 0, 0, 0, 0,
                                          0,    0,    0,    0,    0, 0, 0, 64, 0, 0, 0, 1};
  const std::vector<uint8_t> le_rec = {0, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 100, 0, 0, 0};
  const std::vector<uint8_t> be_rec = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 100};
  for (const bool be : {false, true}) {
    std::vector<uint8_t> f = be ? be_snap64 : le_snap64;
    const auto& header = be ? be_rec : le_rec;
    f.insert(f.end(), header.begin(), header.end());
    f.resize(f.size() + 100, 0x5a);
    write_file(path("snap64.pcap"), f);
    EXPECT_EQ(read_pcap(path("snap64.pcap")).status().code(), StatusCode::kDataLoss) << "big-endian " << be;
  }

  EXPECT_EQ(read_pcap(path("does-not-exist.pcap")).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace uroce::wire
