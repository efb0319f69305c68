// The tester-helper messages: see control.h.
#include "apps/conform/control.h"

#include <cstring>

#include "apps/common/args.h"

namespace uroce::apps::conform {

std::string_view Msg::get(std::string_view key) const {
  const auto it = kv.find(key);
  return it == kv.end() ? std::string_view() : std::string_view(it->second);
}

std::optional<uint64_t> Msg::num(std::string_view key) const {
  const auto it = kv.find(key);
  if (it == kv.end()) return std::nullopt;
  return parse_uint(it->second);
}

std::string ipv4_text(const Gid& g) {
  return std::to_string(g.raw[12]) + '.' + std::to_string(g.raw[13]) + '.' + std::to_string(g.raw[14]) + '.' +
         std::to_string(g.raw[15]);
}

Msg parse_msg(std::span<const char> bytes) {
  const std::string_view text(bytes.data(), strnlen(bytes.data(), bytes.size()));
  Msg m;
  size_t pos = 0;
  bool first = true;
  while (pos < text.size()) {
    const size_t end = std::min(text.find(' ', pos), text.size());
    const std::string_view word = text.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty()) continue;
    if (first) {
      m.verb = word;
      first = false;
      continue;
    }
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos) {
      m.kv.emplace(std::string(word), "");
    } else {
      m.kv.emplace(std::string(word.substr(0, eq)), std::string(word.substr(eq + 1)));
    }
  }
  return m;
}

std::string format_msg(std::string_view verb, std::initializer_list<std::pair<std::string_view, std::string>> kv) {
  std::string s(verb);
  for (const auto& [k, v] : kv) {
    s += ' ';
    s += k;
    s += '=';
    s += v;
  }
  return s.size() < kMsgBytes ? s : std::string();
}

}  // namespace uroce::apps::conform
