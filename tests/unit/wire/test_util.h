// Helpers shared by the wire tests: the captured golden frames in tests/data
// (real rdma_rxe traffic; see tests/data/README.md), found by reading raw bytes
// at fixed offsets, independently of stack/wire's parser, and a few
// hand-written byte operations (IPv4 checksum, big-endian fields).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "stack/wire/pcap.h"

#ifndef UROCE_TEST_DATA_DIR
#error "meson passes UROCE_TEST_DATA_DIR, the absolute path of tests/data"
#endif

namespace uroce::wire::test {

// Offsets in an untagged Ethernet II / IPv4 (no options) / UDP / BTH frame,
// which is what every captured RoCE frame is.
inline constexpr size_t kEthLen = 14;
inline constexpr size_t kIpOff = kEthLen;
inline constexpr size_t kUdpOff = kIpOff + 20;
inline constexpr size_t kBthOff = kUdpOff + 8;

inline uint16_t get16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
inline void put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}

/// RFC 1071 checksum of a 20-byte IPv4 header with its checksum field as zero.
inline uint16_t ipv4_header_checksum(const uint8_t* ip) {
  uint32_t sum = 0;
  for (size_t i = 0; i < 20; i += 2) {
    if (i != 10) sum += get16(ip + i);
  }
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(~sum);
}
inline void fix_ipv4_checksum(std::vector<uint8_t>& f, size_t ip_off = kIpOff) {
  put16(f.data() + ip_off + 10, ipv4_header_checksum(f.data() + ip_off));
}

struct CapturedFrame {
  std::string file;    // file name within tests/data
  size_t number = 0;   // 1-based frame number, as tshark counts
  std::vector<uint8_t> bytes;
  size_t ip_end = 0;   // one past the IP datagram; bytes after it are Ethernet padding
  std::string where() const { return file + " frame " + std::to_string(number); }
};

inline std::vector<std::filesystem::path> test_pcaps() {
  std::vector<std::filesystem::path> v;
  for (const auto& e : std::filesystem::directory_iterator(UROCE_TEST_DATA_DIR)) {
    if (e.path().extension() == ".pcap") v.push_back(e.path());
  }
  std::sort(v.begin(), v.end());
  return v;
}

/// True for Ethernet II / IPv4 / UDP to port 4791, judged from raw bytes.
inline bool looks_like_rocev2(const std::vector<uint8_t>& f) {
  return f.size() >= kBthOff && get16(&f[12]) == 0x0800 && f[kIpOff] == 0x45 && f[kIpOff + 9] == 17 &&
         get16(&f[kUdpOff + 2]) == 4791;
}

/// Every RoCEv2 frame of every bundled pcap, loaded once.
inline const std::vector<CapturedFrame>& captured_roce_frames() {
  static const std::vector<CapturedFrame> frames = [] {
    std::vector<CapturedFrame> v;
    for (const auto& path : test_pcaps()) {
      auto recs = read_pcap(path.string());
      EXPECT_TRUE(recs.ok()) << path << ": " << recs.status().message();
      if (!recs.ok()) continue;
      for (size_t i = 0; i < recs->size(); ++i) {
        std::vector<uint8_t>& b = (*recs)[i].data;
        if (!looks_like_rocev2(b)) continue;
        CapturedFrame f{path.filename().string(), i + 1, std::move(b), 0};
        f.ip_end = kIpOff + get16(&f.bytes[kIpOff + 2]);
        v.push_back(std::move(f));
      }
    }
    return v;
  }();
  return frames;
}

inline std::vector<uint8_t> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

/// A fresh, empty directory for one test's files (unique per process; tests run as processes).
inline std::filesystem::path temp_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() /
                 ("uroce-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace uroce::wire::test
