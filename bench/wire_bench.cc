// Cost per frame of the wire layer (stack/wire/packet.h): parse with and
// without ICRC verification, build (headers + payload copy + ICRC) and
// write_headers alone, the latter also from a path template (the connected
// QP's transmit path, wire::PathTemplate), on two RoCEv2/IPv4 frames:
//   send_only_64B     RC SEND Only, 64-byte payload   (122-byte frame)
//   write_only_4096B  RC RDMA WRITE Only, 4096 bytes  (4170-byte frame)
// The time column is ns per frame; items_per_second is frames per second.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "stack/wire/opcodes.h"
#include "stack/wire/packet.h"

namespace {

namespace wire = uroce::wire;

struct Case {
  wire::PacketDesc desc;
  std::vector<uint8_t> payload;
  std::vector<uint8_t> frame;  // built from desc and payload
};

Case make_case(uint8_t opcode, uint32_t payload_len) {
  Case c;
  wire::PacketDesc& d = c.desc;
  const uint8_t src[4] = {192, 168, 1, 1};
  const uint8_t dst[4] = {192, 168, 1, 2};
  d.src_mac = {0x02, 0, 0, 0, 0, 1};
  d.dst_mac = {0x02, 0, 0, 0, 0, 2};
  d.sgid = wire::Gid::from_ipv4(src);
  d.dgid = wire::Gid::from_ipv4(dst);
  d.traffic_class = 0x02;  // ECT(0)
  d.udp_sport = 0xc000;
  d.opcode = opcode;
  d.dest_qp = 0x11;
  d.ack_req = true;
  d.psn = 0xfffffe;
  if (d.op().has(wire::Hdr::kReth)) {
    d.reth_va = 0x7f0000001000;
    d.reth_rkey = 0x1234;
    d.reth_len = payload_len;
  }
  d.payload_len = payload_len;
  d.pad = wire::pad_for(payload_len);
  c.payload.resize(payload_len);
  for (uint32_t i = 0; i < payload_len; ++i) c.payload[i] = uint8_t(i * 7 + 1);
  c.frame.resize(wire::frame_len(d));
  wire::build(d, c.payload, c.frame);
  return c;
}

Case send_only_64B() { return make_case(wire::kRcSendOnly, 64); }
Case write_only_4096B() { return make_case(wire::kRcWriteOnly, 4096); }

void bm_parse(benchmark::State& state, Case (*make)(), bool verify_icrc) {
  const Case c = make();
  wire::PacketDesc d;
  if (wire::parse(c.frame, d) != wire::ParseError::kOk) {
    state.SkipWithError("test frame does not parse");
    return;
  }
  const wire::ParseOptions opt{.verify_icrc = verify_icrc};
  for (auto _ : state) {
    wire::ParseError e = wire::parse(c.frame, d, opt);
    benchmark::DoNotOptimize(e);
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}

void bm_build(benchmark::State& state, Case (*make)()) {
  Case c = make();
  std::vector<uint8_t> out(c.frame.size());
  for (auto _ : state) {
    size_t n = wire::build(c.desc, c.payload, out);
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
  }
  if (out != c.frame) state.SkipWithError("build is not deterministic");
  state.SetItemsProcessed(int64_t(state.iterations()));
}

// What a transmit path with the payload already in the mbuf pays for headers.
void bm_write_headers(benchmark::State& state, Case (*make)()) {
  Case c = make();
  std::vector<uint8_t> out(c.frame.size());
  for (auto _ : state) {
    size_t n = wire::write_headers(c.desc, out);
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}

// The same from a path template, as a connected QP's packets are written
// (transport::fill_qp_path): the template's copy, this packet's lengths, UDP
// source port and IPv4 checksum, then the transport headers.
void bm_write_headers_template(benchmark::State& state, Case (*make)()) {
  Case c = make();
  wire::PathTemplate t;
  wire::make_path_template(c.desc, t);
  wire::PacketDesc d = c.desc;
  d.path = &t;
  std::vector<uint8_t> out(c.frame.size());
  for (auto _ : state) {
    size_t n = wire::write_headers(d, out);
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
  }
  const size_t hlen = wire::header_len(d);
  if (!std::equal(out.begin(), out.begin() + ptrdiff_t(hlen), c.frame.begin())) state.SkipWithError("the template path writes other headers than write_headers");
  state.SetItemsProcessed(int64_t(state.iterations()));
}

struct Frame {
  const char* name;
  Case (*make)();
};
constexpr Frame kFrames[] = {
    {"send_only_64B", send_only_64B},
    {"write_only_4096B", write_only_4096B},
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const std::string parse = "parse/";
  for (const Frame& f : kFrames) {
    benchmark::RegisterBenchmark((parse + f.name + "/icrc").c_str(), bm_parse, f.make, true);
    benchmark::RegisterBenchmark((parse + f.name + "/no_icrc").c_str(), bm_parse, f.make, false);
  }
  for (const Frame& f : kFrames) {
    benchmark::RegisterBenchmark((std::string("build/") + f.name).c_str(), bm_build, f.make);
  }
  for (const Frame& f : kFrames) {
    benchmark::RegisterBenchmark((std::string("write_headers/") + f.name).c_str(), bm_write_headers, f.make);
    benchmark::RegisterBenchmark((std::string("write_headers/") + f.name + "/template").c_str(),
                                 bm_write_headers_template, f.make);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
