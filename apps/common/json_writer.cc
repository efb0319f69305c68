// The JSON writer of the `uroce` tools (RFC 8259); see json_writer.h.
// Control path.
#include "apps/common/json_writer.h"

#include <cmath>
#include <cstdio>

namespace uroce::apps {

std::string json_quote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (const char c : s) {
    const auto u = uint8_t(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {  // RFC 8259 section 7: control characters must be escaped
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;  // UTF-8 sequences pass through
    }
  }
  out += '"';
  return out;
}

void JsonWriter::line_break() {
  if (newline_) out_ += '\n';
  newline_ = false;
}

void JsonWriter::value_start() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_item_.empty()) {
    if (has_item_.back()) out_ += ',';
    has_item_.back() = true;
  }
  line_break();
}

JsonWriter& JsonWriter::open(char c) {
  value_start();
  out_ += c;
  has_item_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::close(char c) {
  line_break();
  out_ += c;
  if (!has_item_.empty()) has_item_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::begin_object() { return open('{'); }
JsonWriter& JsonWriter::end_object() { return close('}'); }
JsonWriter& JsonWriter::begin_array() { return open('['); }
JsonWriter& JsonWriter::end_array() { return close(']'); }

JsonWriter& JsonWriter::key(std::string_view k) {
  value_start();
  out_ += json_quote(k);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::str(std::string_view s) {
  value_start();
  out_ += json_quote(s);
  return *this;
}

JsonWriter& JsonWriter::boolean(bool b) { return raw(b ? "true" : "false"); }
JsonWriter& JsonWriter::null() { return raw("null"); }
JsonWriter& JsonWriter::num_signed(int64_t v) { return raw(std::to_string(v)); }
JsonWriter& JsonWriter::num_unsigned(uint64_t v) { return raw(std::to_string(v)); }

JsonWriter& JsonWriter::fixed(double v, int decimals) {
  if (!std::isfinite(v)) return null();
  char b[512];
  std::snprintf(b, sizeof(b), "%.*f", decimals, v);
  return raw(b);
}

JsonWriter& JsonWriter::general(double v, int digits) {
  if (!std::isfinite(v)) return null();
  char b[64];
  std::snprintf(b, sizeof(b), "%.*g", digits, v);
  return raw(b);
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  value_start();
  out_ += json;
  return *this;
}

JsonWriter& JsonWriter::newline() {
  newline_ = true;
  return *this;
}

void JsonWriter::flush(std::FILE* f) {
  std::fputs(out_.c_str(), f);
  out_.clear();
}

}  // namespace uroce::apps
