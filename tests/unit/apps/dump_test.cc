// Tests for apps/tools/dump.cc, run as a process: the built `uroce dump` binary on
// the bundled captures, on corrupted copies and on files that are not pcaps.
// A crash shows up as death by signal, which every case checks for.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stack/wire/pcap.h"
#include "tests/unit/wire/test_util.h"

#ifndef UROCE_DUMP_EXE
#error "meson passes UROCE_DUMP_EXE, the path of the built uroce binary"
#endif

extern char** environ;

namespace uroce::wire {
namespace {

namespace fs = std::filesystem;

struct DumpRun {
  int exit_code = -1;  // -1 if it did not exit normally
  int signal = 0;      // the signal that killed it, 0 if none
  std::string out;     // stdout and stderr together
};

// stdout and stderr go to r.out; with stdout_to, stdout goes there instead.
DumpRun run_dump(const std::vector<std::string>& args, const fs::path& dir, const char* stdout_to = nullptr) {
  DumpRun r;
  const fs::path out_path = dir / "dump.out";
  std::vector<std::string> argv_s = {UROCE_DUMP_EXE, "dump"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (stdout_to) {
    posix_spawn_file_actions_addopen(&fa, 1, stdout_to, O_WRONLY, 0);
  } else {
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
  }
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ADD_FAILURE() << "cannot start " << UROCE_DUMP_EXE << ": " << rc;
    return r;
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {
    ADD_FAILURE() << "waitpid failed";
    return r;
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  const auto bytes = test::read_file(out_path);
  r.out.assign(bytes.begin(), bytes.end());
  return r;
}

class DumpTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::temp_dir("dump"); }
  void TearDown() override { fs::remove_all(dir_); }
  DumpRun dump(const std::vector<std::string>& args, const char* stdout_to = nullptr) {
    return run_dump(args, dir_, stdout_to);
  }
  fs::path dir_;
};

std::vector<std::string> bundled() {
  std::vector<std::string> v;
  for (const auto& p : test::test_pcaps()) v.push_back(p.string());
  return v;
}

TEST_F(DumpTest, OutputCutShortByAFullDiskFailsTheCommand) {
  // Receive: uroce dump of a bundled capture with stdout on /dev/full
  //   (every write fails with ENOSPC).
  // Expect: exit 1 and the reason on stderr, not exit 0 with the output lost.
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const DumpRun r = dump({bundled().front()}, "/dev/full");
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("uroce dump: writing the output failed: No space left on device"), std::string::npos) << r.out;
}

TEST_F(DumpTest, VerifySucceedsOnAllBundledCaptures) {
  // Receive: uroce dump --verify on every bundled capture at once, text and JSON.
  // Expect: exit 0, no signal; every RoCE frame shown with icrc=ok, none bad.
  std::vector<std::string> args = {"--verify"};
  for (const auto& p : bundled()) args.push_back(p);
  const DumpRun text = dump(args);
  EXPECT_EQ(text.signal, 0);
  EXPECT_EQ(text.exit_code, 0) << text.out.substr(0, 2000);
  EXPECT_EQ(text.out.find("icrc=bad"), std::string::npos);
  EXPECT_EQ(text.out.find("malformed RoCE frame"), std::string::npos);
  size_t ok_lines = 0;
  for (size_t at = 0; (at = text.out.find("icrc=ok", at)) != std::string::npos; ++at) ++ok_lines;
  EXPECT_EQ(ok_lines, test::captured_roce_frames().size());
  EXPECT_NE(text.out.find("verify: ok"), std::string::npos);

  args.insert(args.begin(), "--json");
  const DumpRun json = dump(args);
  EXPECT_EQ(json.signal, 0);
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_NE(json.out.find("\"icrc_bad\":0,"), std::string::npos);
  EXPECT_EQ(json.out.find("\"icrc_ok\":false"), std::string::npos);
}

TEST_F(DumpTest, VerifyFailsOnACopyWithOneBitFlipped) {
  // Receive: a copy of a bundled capture with one bit flipped in the PSN of
  //   its first RoCE frame (located by walking the pcap records by hand).
  // Expect: --verify exits 1 and the frame shows icrc=bad; without --verify the
  //   same file exits 0 (it was read and decoded).
  const fs::path src = fs::path(UROCE_TEST_DATA_DIR) / "rxe-rc-pingpong-send.pcap";
  std::vector<uint8_t> bytes = test::read_file(src);
  size_t at = 24;
  bool flipped = false;
  while (at + 16 <= bytes.size()) {
    const uint32_t incl = uint32_t(bytes[at + 8]) | uint32_t(bytes[at + 9]) << 8 |
                          uint32_t(bytes[at + 10]) << 16 | uint32_t(bytes[at + 11]) << 24;
    const std::vector<uint8_t> frame(bytes.begin() + long(at + 16), bytes.begin() + long(at + 16 + incl));
    if (test::looks_like_rocev2(frame)) {
      bytes[at + 16 + test::kBthOff + 11] ^= 0x01;  // PSN low bit
      flipped = true;
      break;
    }
    at += 16 + incl;
  }
  ASSERT_TRUE(flipped);
  const fs::path bad = dir_ / "one-bit.pcap";
  test::write_file(bad, bytes);

  const DumpRun v = dump({"--verify", bad.string()});
  EXPECT_EQ(v.signal, 0);
  EXPECT_EQ(v.exit_code, 1) << v.out;
  EXPECT_NE(v.out.find("icrc=bad"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("1 icrc bad"), std::string::npos) << v.out;

  const DumpRun plain = dump({bad.string()});
  EXPECT_EQ(plain.signal, 0);
  EXPECT_EQ(plain.exit_code, 0) << plain.out;

  const DumpRun json = dump({"--verify", "--json", bad.string()});
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_NE(json.out.find("\"status\":\"bad_icrc\""), std::string::npos) << json.out;
}

TEST_F(DumpTest, MalformedRoceFrameIsShownWithItsReasonAndFailsVerify) {
  // Receive: a pcap (written with PcapWriter) holding a captured RoCE frame,
  //   the same frame cut by 10 bytes (IP length now past the end), and an
  //   ARP-like non-RoCE frame.
  // Expect: the cut frame is listed as "malformed RoCE frame: length_mismatch",
  //   counted in the summary by reason, the ARP frame only counted; --verify
  //   exits 1, plain dump exits 0; JSON gives status "length_mismatch".
  const std::vector<uint8_t> good = test::captured_roce_frames().front().bytes;
  std::vector<uint8_t> cut(good.begin(), good.end() - 10);
  std::vector<uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  const fs::path p = dir_ / "mixed.pcap";
  {
    PcapWriter w;
    ASSERT_TRUE(w.open(p.string()).ok());
    w.write(good, 1);
    w.write(cut, 2);
    w.write(arp, 3);
  }
  const DumpRun text = dump({p.string()});
  EXPECT_EQ(text.signal, 0);
  EXPECT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("     2 malformed RoCE frame: length_mismatch"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("3 frames, 2 RoCE (1 icrc ok, 0 icrc bad, 1 malformed), 1 not RoCE"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("malformed: length_mismatch=1"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("not RoCE: not_roce_ethertype=1"), std::string::npos) << text.out;

  const DumpRun v = dump({"--verify", p.string()});
  EXPECT_EQ(v.signal, 0);
  EXPECT_EQ(v.exit_code, 1) << v.out;
  const DumpRun json = dump({"--json", p.string()});
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_NE(json.out.find("{\"frame\":2,\"len\":" + std::to_string(cut.size()) + ",\"status\":\"length_mismatch\"}"),
            std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"malformed_by_reason\":{\"length_mismatch\":1}"), std::string::npos) << json.out;
}

TEST_F(DumpTest, GarbageTruncatedEmptyAndMissingFilesFailCleanly) {
  // Receive: 64 KiB of random bytes; a capture cut inside a record; an empty
  //   file; a pcapng header; a path that does not exist; each with and without
  //   --json and --verify.
  // Expect: exit 1 with an error naming the file, no signal.
  std::vector<uint8_t> junk(65536);
  std::mt19937 rng(99);
  for (auto& b : junk) b = uint8_t(rng());
  test::write_file(dir_ / "junk.pcap", junk);
  std::vector<uint8_t> cut = test::read_file(fs::path(UROCE_TEST_DATA_DIR) / "rxe-rc-send-bw-3000B.pcap");
  ASSERT_GT(cut.size(), 1000u);
  cut.erase(cut.end() - 100, cut.end());  // ends inside the last record
  test::write_file(dir_ / "cut.pcap", cut);
  test::write_file(dir_ / "empty.pcap", {});
  test::write_file(dir_ / "ng.pcapng", {0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a});
  for (const char* name : {"junk.pcap", "cut.pcap", "empty.pcap", "ng.pcapng", "missing.pcap"}) {
    const std::string p = (dir_ / name).string();
    for (const auto& extra : std::vector<std::vector<std::string>>{{}, {"--json"}, {"--verify"}}) {
      std::vector<std::string> args = extra;
      args.push_back(p);
      const DumpRun r = dump(args);
      EXPECT_EQ(r.signal, 0) << name;
      EXPECT_EQ(r.exit_code, 1) << name << "\n" << r.out;
      EXPECT_NE(r.out.find(p), std::string::npos) << name << ": error does not name the file\n" << r.out;
    }
  }
}

TEST_F(DumpTest, GoodFileAfterABadOneIsStillDumpedButExitIs1) {
  // Receive: a missing file followed by a good capture.
  // Expect: the good file's frames are printed; exit 1 for the missing one.
  const DumpRun r = dump({(dir_ / "missing.pcap").string(),
                      (fs::path(UROCE_TEST_DATA_DIR) / "rxe-ud-pingpong-deth.pcap").string()});
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("UD Send Only"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("deth=[qkey=0x11111111"), std::string::npos) << r.out;
}

TEST_F(DumpTest, UsageErrorsExit2AndHelpExits0) {
  // Receive: no file; an unknown option; a flag given a value; --help.
  // Expect: exit 2 with a one-line error for the first three; exit 0 and every
  //   option listed with its default for --help.
  for (const auto& args : std::vector<std::vector<std::string>>{{}, {"--bogus", "x.pcap"}, {"--verify=yes", "x"}}) {
    const DumpRun r = dump(args);
    EXPECT_EQ(r.signal, 0);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  }
  const DumpRun h = dump({"--help"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("--verify"), std::string::npos);
  EXPECT_NE(h.out.find("--json"), std::string::npos);
  EXPECT_NE(h.out.find("(default: off)"), std::string::npos);
}

}  // namespace
}  // namespace uroce::wire
