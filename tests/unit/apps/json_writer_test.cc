// Tests for apps/common/json_writer.cc, the JSON writer of every `uroce
// --json` output, against RFC 8259: section 7 (strings: '"' and '\\' escaped,
// U+0000..U+001F escaped, other characters, UTF-8 included, as they are),
// section 6 (numbers: no NaN or infinity), sections 4 and 5 (objects and
// arrays, commas between members). The last cases hand the output to
// python3's json module, an independent parser.
#include "apps/common/json_writer.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace uroce::apps {
namespace {

TEST(JsonQuote, Rfc8259_7_QuoteAndBackslashAreEscaped) {
  EXPECT_EQ(json_quote(R"(say "hi" \o/)"), R"("say \"hi\" \\o/")");
}

TEST(JsonQuote, Rfc8259_7_EveryControlCharacterIsEscapedAsU00xx) {
  for (int c = 0; c < 0x20; ++c) {
    char want[16];
    std::snprintf(want, sizeof(want), "\"\\u%04x\"", c);
    EXPECT_EQ(json_quote(std::string(1, char(c))), want) << "character " << c;
  }
  EXPECT_EQ(json_quote("a\x1f" "b"), "\"a\\u001fb\"");
  EXPECT_EQ(json_quote("line\nnext\ttab"), "\"line\\u000anext\\u0009tab\"");
  EXPECT_EQ(json_quote(std::string("nul\0in", 6)), "\"nul\\u0000in\"");
}

TEST(JsonQuote, Rfc8259_7_NonAsciiUtf8AndDelPassThrough) {
  // U+00E9, U+20AC, U+1F600 in UTF-8, and DEL (not a control character in JSON's sense).
  const std::string s = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \x7f /";
  EXPECT_EQ(json_quote(s), "\"" + s + "\"");
}

TEST(JsonWriter, Rfc8259_4_5_NestingPutsCommasBetweenMembersOnly) {
  JsonWriter w;
  w.begin_object();
  w.key("a").num(1);
  w.key("list").begin_array().num(1).begin_object().end_object().begin_array().end_array().str("x").end_array();
  w.key("obj").begin_object().key("k").null().key("t").boolean(true).key("f").boolean(false).end_object();
  w.key("empty").begin_object().end_object();
  w.end_object();
  EXPECT_EQ(w.text(), R"({"a":1,"list":[1,{},[],"x"],"obj":{"k":null,"t":true,"f":false},"empty":{}})");
}

TEST(JsonWriter, KeysAreEscapedToo) {
  JsonWriter w;
  w.begin_object().key("a\"b\x01").num(0).end_object();
  EXPECT_EQ(w.text(), "{\"a\\\"b\\u0001\":0}");
}

TEST(JsonWriter, Rfc8259_6_Numbers) {
  JsonWriter w;
  w.begin_array();
  w.num(uint64_t(18446744073709551615u)).num(int64_t(-9223372036854775807 - 1)).num(0u).num(-3);
  w.fixed(12.345678, 2).fixed(0.5, 0).fixed(-1.25, 3).general(2.0 / 3.0, 4).general(1e21, 4);
  w.end_array();
  EXPECT_EQ(w.text(), "[18446744073709551615,-9223372036854775808,0,-3,12.35,0,-1.250,0.6667,1e+21]");
}

TEST(JsonWriter, Rfc8259_6_NonFiniteDoublesAreNull) {
  JsonWriter w;
  w.begin_array();
  w.fixed(std::numeric_limits<double>::quiet_NaN(), 2).fixed(std::numeric_limits<double>::infinity(), 2);
  w.general(-std::numeric_limits<double>::infinity(), 4);
  w.end_array();
  EXPECT_EQ(w.text(), "[null,null,null]");
}

TEST(JsonWriter, RawAndNewlineKeepTheCommas) {
  JsonWriter inner;
  inner.begin_object().key("n").num(2).end_object();
  JsonWriter w;
  w.begin_object().key("x").raw(inner.text()).newline().key("y").begin_array().newline().raw("1").newline().raw("2");
  w.newline().end_array().end_object();
  // The line break comes after the comma, before the next token.
  EXPECT_EQ(w.text(), "{\"x\":{\"n\":2},\n\"y\":[\n1,\n2\n]}");
}

TEST(JsonWriter, FlushKeepsTheContainersOpen) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  ASSERT_NE(f, nullptr);
  JsonWriter w;
  w.begin_object().key("a").begin_array().num(1);
  w.flush(f);
  EXPECT_EQ(w.text(), "");
  w.num(2).end_array().key("b").boolean(false).end_object();
  w.flush(f);
  std::fclose(f);
  EXPECT_EQ(std::string(buf, len), R"({"a":[1,2],"b":false})");
  std::free(buf);
}

// The writer's output through python3's json module: it must parse, and the
// strings must come back as the bytes that went in.
TEST(JsonWriter, Python3JsonParsesItBack) {
  if (std::system("python3 -c 'import json' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  JsonWriter w;
  std::string all;
  for (int c = 1; c < 0x80; ++c) all += char(c);
  all += "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  w.begin_object().key("all").str(all).key("n").begin_array().num(-1).fixed(1.5, 3).general(1e-7, 3);
  w.fixed(std::numeric_limits<double>::quiet_NaN(), 1).end_array();
  w.key("deep").begin_array().begin_array().begin_object().key("q\"").str("\\\x1f").end_object().end_array();
  w.end_array().end_object();

  char path[] = "/tmp/uroce-json-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::FILE* f = fdopen(fd, "w");
  ASSERT_NE(f, nullptr);
  std::fputs(w.text().c_str(), f);
  std::fclose(f);
  std::string want_all;  // as a Python literal: every code point by number
  for (int c = 1; c < 0x80; ++c) want_all += std::to_string(c) + ",";
  const std::string check =
      "python3 -c 'import json,sys; d=json.load(open(sys.argv[1], encoding=\"utf-8\")); "
      "assert [ord(c) for c in d[\"all\"]] == [" + want_all + "0xe9,0x20ac,0x1f600], d[\"all\"]; "
      "assert d[\"n\"] == [-1, 1.5, 1e-07, None], d[\"n\"]; "
      "assert d[\"deep\"] == [[{\"q\\\"\": \"\\\\\\x1f\"}]], d[\"deep\"]' " + std::string(path);
  EXPECT_EQ(std::system(check.c_str()), 0) << w.text();
  std::remove(path);
}

}  // namespace
}  // namespace uroce::apps
