// Classic libpcap files (https://www.tcpdump.org/manpages/pcap-savefile.5.html):
// a writer the stack and drivers use to capture frames, and a reader for the
// dump tool and tests. Ethernet link type only. Control path: allocation and
// file I/O are allowed here.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <uroce/status.h>

namespace uroce::wire {

/// The snapshot length a capture has unless told otherwise: frames up to
/// 65,535 bytes are kept whole (every frame of a 9,000-byte MTU fits).
inline constexpr uint32_t kDefaultSnaplen = 65535;

/// Appends frames to a nanosecond-resolution pcap file.
class PcapWriter {
 public:
  PcapWriter() = default;
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;
  ~PcapWriter();

  /// Creates (truncates) path and writes the file header. hold_bytes > 0:
  /// frames are held in a buffer of that size and reach the file when it
  /// fills or at close(); the buffer is allocated and touched once and kept
  /// for later opens, so that a writer reopened for each test case keeps the
  /// cost of fresh pages out of the case (a write that first touches a page
  /// took about 1 us a 1 KB frame on a 2-vCPU guest, 0.2 us in a held buffer).
  Status open(const std::string& path, uint32_t snaplen = kDefaultSnaplen, size_t hold_bytes = 0);
  bool is_open() const { return f_ != nullptr; }
  /// Writes one frame stamped with time_ns (nanoseconds since any epoch).
  /// After a failed write (a full disk) it writes nothing more and counts
  /// the frames it did not write; close() reports them.
  void write(std::span<const uint8_t> frame, uint64_t time_ns);
  /// Flushes and closes the file. kDataLoss if a write or the flush failed:
  /// the capture is incomplete, and the message says why and how many
  /// frames were not written (at least). Ok if nothing was open.
  Status close();

 private:
  std::FILE* f_ = nullptr;
  std::vector<char> held_;  // the buffer open()'s hold_bytes asked for, kept across opens
  std::string path_;
  uint32_t snaplen_ = 0;
  int errno_ = 0;         // the first failed write's errno
  uint64_t unwritten_ = 0;  // frames not written since then
};

struct PcapRecord {
  uint64_t time_ns = 0;
  uint32_t orig_len = 0;
  std::vector<uint8_t> data;
};

/// Reads a whole pcap file (either byte order, micro- or nanosecond stamps).
/// Fails with kDataLoss on a bad magic, a truncated record, or a record larger
/// than the snap length; with kInvalidArgument on a link type other than Ethernet.
Result<std::vector<PcapRecord>> read_pcap(const std::string& path);

}  // namespace uroce::wire
