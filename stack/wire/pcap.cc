#include "stack/wire/pcap.h"

#include <cerrno>
#include <cstring>
#include <memory>

namespace uroce::wire {
namespace {

constexpr uint32_t kMagicUs = 0xa1b2c3d4;
constexpr uint32_t kMagicNs = 0xa1b23c4d;
constexpr uint32_t kLinkTypeEthernet = 1;
constexpr uint32_t kMaxSnaplen = 262144;

struct FileHeader {
  uint32_t magic;
  uint16_t version_major;
  uint16_t version_minor;
  int32_t thiszone;
  uint32_t sigfigs;
  uint32_t snaplen;
  uint32_t linktype;
};
static_assert(sizeof(FileHeader) == 24);

struct RecordHeader {
  uint32_t ts_sec;
  uint32_t ts_frac;
  uint32_t incl_len;
  uint32_t orig_len;
};
static_assert(sizeof(RecordHeader) == 16);

uint32_t swap32(uint32_t v) { return __builtin_bswap32(v); }

}  // namespace

PcapWriter::~PcapWriter() { (void)close(); }

Status PcapWriter::open(const std::string& path, uint32_t snaplen, size_t hold_bytes) {
  (void)close();
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) {
    return Status(StatusCode::kUnavailable, status_message("cannot create %s: %s", path.c_str(), std::strerror(errno)));
  }
  if (hold_bytes != 0) {
    if (held_.size() != hold_bytes) held_.assign(hold_bytes, 0);  // zero-filled: every page touched now
    std::setvbuf(f_, held_.data(), _IOFBF, held_.size());
  }
  path_ = path;
  snaplen_ = snaplen;
  errno_ = 0;
  unwritten_ = 0;
  const FileHeader h{kMagicNs, 2, 4, 0, 0, snaplen, kLinkTypeEthernet};
  if (std::fwrite(&h, sizeof(h), 1, f_) != 1) {
    const int e = errno;
    (void)close();
    return Status(StatusCode::kUnavailable,
                  status_message("cannot write the pcap header of %s: %s", path.c_str(), std::strerror(e)));
  }
  return {};
}

void PcapWriter::write(std::span<const uint8_t> frame, uint64_t time_ns) {
  if (!f_) return;
  if (errno_) {
    ++unwritten_;
    return;
  }
  const uint32_t incl = frame.size() < snaplen_ ? uint32_t(frame.size()) : snaplen_;
  const RecordHeader r{uint32_t(time_ns / 1'000'000'000), uint32_t(time_ns % 1'000'000'000), incl,
                       uint32_t(frame.size())};
  // incl is tested first: an empty span's data() may be null.
  if (std::fwrite(&r, sizeof(r), 1, f_) != 1 || (incl != 0 && std::fwrite(frame.data(), 1, incl, f_) != incl)) {
    errno_ = errno ? errno : EIO;
    ++unwritten_;
  }
}

Status PcapWriter::close() {
  if (!f_) return {};
  if (std::fclose(f_) != 0 && !errno_) errno_ = errno ? errno : EIO;
  f_ = nullptr;
  if (!errno_) return {};
  // Frames stdio still held when a write failed were lost too: the count
  // is of those offered after the failure.
  const std::string lost = unwritten_ ? std::to_string(unwritten_) + " frames and more not written"
                                      : std::string("its last frames were not written");
  return Status(StatusCode::kDataLoss, status_message("capture %s is incomplete (%s): %s", path_.c_str(),
                                                      std::strerror(errno_), lost.c_str()));
}

Result<std::vector<PcapRecord>> read_pcap(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status(StatusCode::kNotFound, "cannot open pcap file");
  FileHeader h;
  if (std::fread(&h, sizeof(h), 1, f.get()) != 1) {
    return Status(StatusCode::kDataLoss, "file shorter than a pcap header");
  }
  bool swap = false;
  if (h.magic == swap32(kMagicUs) || h.magic == swap32(kMagicNs)) {
    swap = true;
    h.magic = swap32(h.magic);
    h.snaplen = swap32(h.snaplen);
    h.linktype = swap32(h.linktype);
  }
  if (h.magic != kMagicUs && h.magic != kMagicNs) {
    return Status(StatusCode::kDataLoss, "not a pcap file (bad magic; pcapng is not supported)");
  }
  if ((h.linktype & 0xffff) != kLinkTypeEthernet) {
    return Status(StatusCode::kInvalidArgument, "pcap link type is not Ethernet");
  }
  const uint32_t frac_per_ns = h.magic == kMagicNs ? 1 : 1000;
  const uint32_t snaplen = h.snaplen == 0 || h.snaplen > kMaxSnaplen ? kMaxSnaplen : h.snaplen;
  std::vector<PcapRecord> out;
  RecordHeader r;
  size_t got;
  while ((got = std::fread(&r, 1, sizeof(r), f.get())) == sizeof(r)) {
    if (swap) {
      r.ts_sec = swap32(r.ts_sec);
      r.ts_frac = swap32(r.ts_frac);
      r.incl_len = swap32(r.incl_len);
      r.orig_len = swap32(r.orig_len);
    }
    if (r.incl_len > snaplen) return Status(StatusCode::kDataLoss, "pcap record longer than snap length");
    PcapRecord rec;
    rec.time_ns = uint64_t(r.ts_sec) * 1'000'000'000 + uint64_t(r.ts_frac) * frac_per_ns;
    rec.orig_len = r.orig_len;
    rec.data.resize(r.incl_len);
    if (std::fread(rec.data.data(), 1, r.incl_len, f.get()) != r.incl_len) {
      return Status(StatusCode::kDataLoss, "pcap file truncated inside a record");
    }
    out.push_back(std::move(rec));
  }
  if (got != 0) return Status(StatusCode::kDataLoss, "pcap file truncated inside a record header");
  return out;
}

}  // namespace uroce::wire
