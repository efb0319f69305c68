// Tests for apps/common/args.cc, the option parser every `uroce` subcommand shares.
#include "apps/common/args.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace uroce::apps {
namespace {

constexpr OptSpec kOpts[] = {
    {.name = "size", .short_name = 's', .kind = OptKind::kUint, .def = "65536", .help = "message size, bytes",
     .min = 1, .max = 1u << 30},
    {.name = "iters", .short_name = 'n', .kind = OptKind::kUint, .def = "1000", .help = "iterations"},
    {.name = "rate", .kind = OptKind::kDouble, .def = "2.5", .help = "rate, Gb/s", .max = 400},
    {.name = "dev", .short_name = 'd', .kind = OptKind::kString, .def = "rxe0", .help = "device"},
    {.name = "mode", .short_name = 'm', .kind = OptKind::kChoice, .def = "rc", .help = "transport",
     .choices = "rc|uc|ud"},
    {.name = "json", .help = "JSON output"},
    {.name = "verbose", .short_name = 'v', .help = "more output"},
};
constexpr CommandSpec kCmd = {
    .name = "perf",
    .positional = "[PEER]",
    .summary = "measure",
    .options = kOpts,
    .max_positional = 1,
};

struct Parsed {
  Args args;
  bool ok = false;
};

// Args keeps views into argv, which in a real main lives for the whole run;
// the words are kept alive here the same way.
Parsed parse(std::vector<std::string> words) {
  static std::deque<std::vector<std::string>> keep;
  keep.push_back(std::move(words));
  keep.back().insert(keep.back().begin(), "perf");
  std::vector<const char*> argv;
  for (const auto& w : keep.back()) argv.push_back(w.c_str());
  Parsed p;
  p.ok = p.args.parse(kCmd, int(argv.size()), argv.data());
  return p;
}

TEST(ParseUint, AcceptsOnlyWholeDecimalOrHexNumbers) {
  // Receive: valid and invalid unsigned texts.
  // Expect: values for the valid ones; nullopt for suffixes, signs, spaces,
  //   empty, bare 0x, and anything beyond 2^64 - 1.
  EXPECT_EQ(parse_uint("0"), 0u);
  EXPECT_EQ(parse_uint("4096"), 4096u);
  EXPECT_EQ(parse_uint("0x1f"), 31u);
  EXPECT_EQ(parse_uint("0X1F"), 31u);
  EXPECT_EQ(parse_uint("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_uint("0xffffffffffffffff"), UINT64_MAX);
  for (const char* bad : {"", "12x", "x12", "+1", "-1", " 1", "1 ", "0x", "0x-1", "1e3", "1.0",
                          "18446744073709551616", "0x10000000000000000", "99999999999999999999999"}) {
    EXPECT_FALSE(parse_uint(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(ParseDouble, AcceptsOnlyWholeFiniteNonNegativeNumbers) {
  // Receive: valid and invalid floating-point texts.
  // Expect: values for the valid ones; nullopt for suffixes, signs, nan, inf, overflow.
  EXPECT_EQ(parse_double("2.5"), 2.5);
  EXPECT_EQ(parse_double("1e3"), 1000.0);
  EXPECT_EQ(parse_double("0"), 0.0);
  for (const char* bad : {"", "2.5x", "-1", "+1", " 1", "nan", "inf", "1e999", "."}) {
    EXPECT_FALSE(parse_double(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(Args, DefaultsApplyWhenNothingIsGiven) {
  // Receive: no arguments. Expect: every default, nothing marked given.
  Parsed p = parse({});
  ASSERT_TRUE(p.ok) << p.args.error();
  EXPECT_EQ(p.args.get_uint("size"), 65536u);
  EXPECT_EQ(p.args.get_uint("iters"), 1000u);
  EXPECT_EQ(p.args.get_double("rate"), 2.5);
  EXPECT_EQ(p.args.get_str("dev"), "rxe0");
  EXPECT_EQ(p.args.get_str("mode"), "rc");
  EXPECT_FALSE(p.args.flag("json"));
  EXPECT_FALSE(p.args.given("size"));
  EXPECT_EQ(p.args.text("size"), "65536");  // the default's text
  EXPECT_TRUE(p.args.positional().empty());
  EXPECT_EQ(p.args.config_line(), "size=65536 iters=1000 rate=2.5 dev=rxe0 mode=rc json=false verbose=false");
}

TEST(Args, LongShortAttachedAndSeparateFormsAllWork) {
  // Receive: each option in a different accepted form, and a positional.
  // Expect: all values set, given() true, the positional kept.
  Parsed p = parse({"--size", "4096", "-n5", "--rate=100", "-d", "mlx5_0", "-m=ud", "--json", "-v", "10.0.0.1"});
  ASSERT_TRUE(p.ok) << p.args.error();
  EXPECT_EQ(p.args.get_uint("size"), 4096u);
  EXPECT_EQ(p.args.get_uint("iters"), 5u);
  EXPECT_EQ(p.args.get_double("rate"), 100.0);
  EXPECT_EQ(p.args.get_str("dev"), "mlx5_0");
  EXPECT_EQ(p.args.get_str("mode"), "ud");
  EXPECT_TRUE(p.args.flag("json"));
  EXPECT_TRUE(p.args.flag("verbose"));
  EXPECT_TRUE(p.args.given("size"));
  EXPECT_EQ(p.args.text("rate"), "100");  // as typed, for any kind with a value
  EXPECT_EQ(p.args.text("mode"), "ud");
  ASSERT_EQ(p.args.positional().size(), 1u);
  EXPECT_EQ(p.args.positional()[0], "10.0.0.1");
}

TEST(Args, LastOccurrenceWinsAndDoubleDashEndsOptions) {
  // Receive: --size twice; then "--" followed by "--json" (positional after it).
  // Expect: the later size; --json is a positional, the flag stays off.
  Parsed p = parse({"-s", "10", "--size=20", "--", "--json"});
  ASSERT_TRUE(p.ok) << p.args.error();
  EXPECT_EQ(p.args.get_uint("size"), 20u);
  EXPECT_FALSE(p.args.flag("json"));
  ASSERT_EQ(p.args.positional().size(), 1u);
  EXPECT_EQ(p.args.positional()[0], "--json");
  Parsed dash = parse({"-"});
  ASSERT_TRUE(dash.ok);
  EXPECT_EQ(dash.args.positional()[0], "-");
}

TEST(Args, UsageErrorsGiveOneLineMessages) {
  // Receive: each kind of bad command line.
  // Expect: parse fails, not as --help, with a one-line error naming the cause.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--bogus"}, "unknown option '--bogus'"},
      {{"-x"}, "unknown option '-x'"},
      {{"--size"}, "needs a value"},
      {{"--size", "12x"}, "invalid value '12x' for --size"},
      {{"-s", "0"}, "must be in 1..1073741824"},
      {{"--size=1073741825"}, "must be in 1..1073741824"},
      {{"--iters", "18446744073709551616"}, "not an unsigned integer"},
      {{"--rate", "401"}, "must be in 0..400"},
      {{"--rate", "fast"}, "invalid value 'fast' for --rate"},
      {{"--mode", "rd"}, "must be one of rc|uc|ud"},
      {{"--json=1"}, "option '--json' takes no value"},
      {{"-vv"}, "option '-v' takes no value"},
      {{"a", "b"}, "unexpected argument 'b'"},
  };
  for (const auto& [words, want] : cases) {
    Parsed p = parse(words);
    EXPECT_FALSE(p.ok) << want;
    EXPECT_FALSE(p.args.help_requested());
    EXPECT_NE(p.args.error().find(want), std::string::npos) << p.args.error();
    EXPECT_EQ(p.args.error().find('\n'), std::string::npos);
  }
}

TEST(Args, MissingPositionalIsAnError) {
  // Receive: a command that needs at least one file, given none.
  // Expect: an error that names what is missing.
  constexpr CommandSpec need = {.name = "dump", .positional = "FILE.pcap...", .min_positional = 1};
  Args a;
  const char* argv[] = {"dump"};
  EXPECT_FALSE(a.parse(need, 1, argv));
  EXPECT_EQ(a.error(), "missing FILE.pcap...");
}

TEST(Args, HelpListsEveryOptionWithItsDefault) {
  // Receive: --help (anywhere on the line, even after a bad value).
  // Expect: help_requested, and the help text names every option, its short
  //   form, its default and range.
  Parsed p = parse({"--size", "1", "--help", "--bogus"});
  EXPECT_FALSE(p.ok);
  EXPECT_TRUE(p.args.help_requested());
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* mem = open_memstream(&buf, &len);
  ASSERT_NE(mem, nullptr);
  p.args.print_help(mem);
  std::fclose(mem);
  const std::string help(buf, len);
  std::free(buf);
  EXPECT_NE(help.find("usage: uroce perf [options] [PEER]"), std::string::npos) << help;
  EXPECT_NE(help.find("-h, --help"), std::string::npos) << help;
  EXPECT_NE(help.find("-s, --size N"), std::string::npos) << help;
  EXPECT_NE(help.find("(default: 65536; 1..1073741824)"), std::string::npos) << help;
  EXPECT_NE(help.find("(default: 1000)"), std::string::npos) << help;
  EXPECT_NE(help.find("--rate X"), std::string::npos) << help;
  EXPECT_NE(help.find("(default: 'rxe0')"), std::string::npos) << help;
  EXPECT_NE(help.find("-m, --mode rc|uc|ud"), std::string::npos) << help;
  EXPECT_NE(help.find("--json"), std::string::npos) << help;
  EXPECT_NE(help.find("-v, --verbose"), std::string::npos) << help;
  EXPECT_NE(help.find("(default: off)"), std::string::npos) << help;
}

TEST(ArgsDeathTest, UndeclaredOptionOrBadDefaultIsABug) {
  // Receive: a lookup of an option the table lacks; a table whose default
  //   does not parse.
  // Expect: abort with "internal error" (a programming error, not a usage error).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Parsed p = parse({});
  EXPECT_DEATH((void)p.args.get_uint("nope"), "internal error");
  EXPECT_DEATH((void)p.args.get_uint("dev"), "internal error");
  static constexpr OptSpec kBad[] = {{.name = "n", .kind = OptKind::kUint, .def = "ten"}};
  static constexpr CommandSpec kBadCmd = {.name = "bad", .options = kBad};
  EXPECT_DEATH(
      {
        Args a;
        const char* argv[] = {"bad"};
        (void)a.parse(kBadCmd, 1, argv);
      },
      "internal error");
}

}  // namespace
}  // namespace uroce::apps
