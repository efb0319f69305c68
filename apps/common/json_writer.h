// The one JSON writer of the `uroce` tools: every --json output goes through
// it. RFC 8259: strings escape '"', '\\' and every control character
// (U+0000..U+001F, as \u00xx, section 7); other bytes, UTF-8 included, pass
// through as they are. Numbers keep the tools' printf formats (integers in
// full, doubles with a fixed number of decimals or significant digits); a
// double that is not finite is written as null (section 6 has no NaN or
// infinity). Commas between members and elements are the writer's business.
//
//   JsonWriter w;
//   w.begin_object().key("command").str("perf").key("size").num(64u);
//   w.key("bw").fixed(12.345, 2).key("ok").boolean(true).end_object();
//   std::puts(w.text().c_str());   // {"command":"perf","size":64,"bw":12.35,"ok":true}
//
// Control path only (it builds a std::string).
#pragma once

#include <concepts>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace uroce::apps {

/// s as a JSON string, quotes included (RFC 8259 section 7).
std::string json_quote(std::string_view s);

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  /// The member name of the next value (inside an object).
  JsonWriter& key(std::string_view k);

  JsonWriter& str(std::string_view s);
  JsonWriter& boolean(bool b);
  JsonWriter& null();
  /// An integer, in full.
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  JsonWriter& num(T v) {
    if constexpr (std::is_signed_v<T>) return num_signed(int64_t(v));
    else return num_unsigned(uint64_t(v));
  }
  /// A double with `decimals` digits after the point (printf "%.Nf").
  JsonWriter& fixed(double v, int decimals);
  /// A double with `digits` significant digits (printf "%.Ng").
  JsonWriter& general(double v, int digits);
  /// A value that is already JSON text (another writer's text()), as it is.
  JsonWriter& raw(std::string_view json);
  /// A line break before the next value or bracket (after its comma), for
  /// output that people read a line at a time; not a value itself.
  JsonWriter& newline();

  /// What has been written so far (since the last flush).
  const std::string& text() const { return out_; }
  /// Writes text() to f and empties it; the open objects and arrays stay
  /// open, so a long document can go out piece by piece.
  void flush(std::FILE* f);

 private:
  JsonWriter& num_signed(int64_t v);
  JsonWriter& num_unsigned(uint64_t v);
  void value_start();  // the comma before a value, unless it follows its key or opens its container
  void line_break();   // a pending newline()
  JsonWriter& open(char c);
  JsonWriter& close(char c);

  std::string out_;
  std::vector<bool> has_item_;  // per open container: a member / element written already
  bool after_key_ = false;
  bool newline_ = false;
};

}  // namespace uroce::apps
