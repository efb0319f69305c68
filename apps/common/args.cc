#include "apps/common/args.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <system_error>

namespace uroce::apps {
namespace {

[[noreturn]] void die_bug(std::string_view what, std::string_view name) {
  std::fprintf(stderr, "uroce: internal error: %.*s '%.*s'\n", int(what.size()), what.data(),
               int(name.size()), name.data());
  std::abort();
}

bool is_choice(std::string_view choices, std::string_view word) {
  while (!choices.empty()) {
    const size_t bar = choices.find('|');
    if (choices.substr(0, bar) == word) return true;
    if (bar == std::string_view::npos) break;
    choices.remove_prefix(bar + 1);
  }
  return false;
}

std::string_view meta_of(const OptSpec& o) {
  if (!o.meta.empty()) return o.meta;
  switch (o.kind) {
    case OptKind::kFlag: return "";
    case OptKind::kUint: return "N";
    case OptKind::kDouble: return "X";
    case OptKind::kString: return "STR";
    case OptKind::kChoice: return o.choices;
  }
  return "";
}

std::string quoted(std::string_view s) {
  std::string r = "'";
  r.append(s);
  r += '\'';
  return r;
}

}  // namespace

std::optional<uint64_t> parse_uint(std::string_view text) {
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  // from_chars accepts no sign, space or prefix; a '-' would be rejected too.
  if (text.empty() || text[0] == '-' || text[0] == '+') return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view text) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v,
                                         std::chars_format::general);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

size_t Args::index_of(std::string_view name, OptKind kind) const {
  if (!spec_) die_bug("option looked up before parse", name);
  for (size_t i = 0; i < spec_->options.size(); ++i) {
    if (spec_->options[i].name != name) continue;
    const OptKind k = spec_->options[i].kind;
    const bool text_kind = kind == OptKind::kString && k == OptKind::kChoice;
    if (k != kind && !text_kind) die_bug("option read as the wrong kind", name);
    return i;
  }
  die_bug("undeclared option", name);
}

bool Args::flag(std::string_view name) const { return values_[index_of(name, OptKind::kFlag)].on; }
uint64_t Args::get_uint(std::string_view name) const { return values_[index_of(name, OptKind::kUint)].u; }
double Args::get_double(std::string_view name) const {
  return values_[index_of(name, OptKind::kDouble)].d;
}
std::string_view Args::get_str(std::string_view name) const {
  return values_[index_of(name, OptKind::kString)].text;
}

bool Args::given(std::string_view name) const {
  if (!spec_) die_bug("option looked up before parse", name);
  for (size_t i = 0; i < spec_->options.size(); ++i) {
    if (spec_->options[i].name == name) return values_[i].given;
  }
  die_bug("undeclared option", name);
}

std::string_view Args::text(std::string_view name) const {
  if (!spec_) die_bug("option looked up before parse", name);
  for (size_t i = 0; i < spec_->options.size(); ++i) {
    if (spec_->options[i].name != name) continue;
    if (spec_->options[i].kind == OptKind::kFlag) die_bug("a flag has no value text", name);
    return values_[i].text;
  }
  die_bug("undeclared option", name);
}

bool Args::set_value(size_t i, std::string_view text, std::string_view as_typed) {
  const OptSpec& o = spec_->options[i];
  Value& v = values_[i];
  v.text = text;
  auto bad = [&](std::string_view why) {
    error_ = "invalid value " + quoted(text) + " for " + std::string(as_typed) + ": " + std::string(why);
    return false;
  };
  switch (o.kind) {
    case OptKind::kFlag:
      v.on = true;
      return true;
    case OptKind::kUint: {
      const auto n = parse_uint(text);
      if (!n) return bad("not an unsigned integer (or out of range)");
      if (*n < o.min || *n > o.max) {
        return bad("must be in " + std::to_string(o.min) + ".." + std::to_string(o.max));
      }
      v.u = *n;
      return true;
    }
    case OptKind::kDouble: {
      const auto x = parse_double(text);
      if (!x) return bad("not a finite non-negative number");
      if (*x < double(o.min) || *x > double(o.max)) {
        return bad("must be in " + std::to_string(o.min) + ".." + std::to_string(o.max));
      }
      v.d = *x;
      return true;
    }
    case OptKind::kString:
      return true;
    case OptKind::kChoice:
      if (!is_choice(o.choices, text)) return bad("must be one of " + std::string(o.choices));
      return true;
  }
  return bad("unknown option kind");
}

bool Args::parse(const CommandSpec& spec, int argc, const char* const* argv) {
  spec_ = &spec;
  values_.assign(spec.options.size(), Value{});
  positional_.clear();
  error_.clear();
  help_ = false;
  for (size_t i = 0; i < spec.options.size(); ++i) {
    const OptSpec& o = spec.options[i];
    if (o.kind == OptKind::kFlag) continue;
    if (!set_value(i, o.def, "--" + std::string(o.name))) die_bug("bad default in option table", o.name);
  }

  auto find_long = [&](std::string_view name) -> size_t {
    for (size_t i = 0; i < spec.options.size(); ++i) {
      if (spec.options[i].name == name) return i;
    }
    return spec.options.size();
  };
  auto find_short = [&](char c) -> size_t {
    for (size_t i = 0; i < spec.options.size(); ++i) {
      if (spec.options[i].short_name == c) return i;
    }
    return spec.options.size();
  };

  bool options_done = false;
  for (int a = 1; a < argc; ++a) {
    const std::string_view arg = argv[a];
    if (options_done || arg.size() < 2 || arg[0] != '-') {
      positional_.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      return false;
    }
    size_t i;
    std::string as_typed;
    std::optional<std::string_view> attached;  // value given in the same argument
    if (arg[1] == '-') {
      std::string_view name = arg.substr(2);
      const size_t eq = name.find('=');
      if (eq != std::string_view::npos) {
        attached = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      i = find_long(name);
      as_typed = "--" + std::string(name);
    } else {
      i = find_short(arg[1]);
      as_typed = std::string(arg.substr(0, 2));
      if (arg.size() > 2) attached = arg.substr(arg[2] == '=' ? 3 : 2);
    }
    if (i == spec.options.size()) {
      error_ = "unknown option " + quoted(as_typed);
      return false;
    }
    values_[i].given = true;
    if (spec.options[i].kind == OptKind::kFlag) {
      if (attached) {
        error_ = "option " + quoted(as_typed) + " takes no value";
        return false;
      }
      values_[i].on = true;
      continue;
    }
    std::string_view text;
    if (attached) {
      text = *attached;
    } else if (a + 1 < argc) {
      text = argv[++a];
    } else {
      error_ = "option " + quoted(as_typed) + " needs a value";
      return false;
    }
    if (!set_value(i, text, as_typed)) return false;
  }

  if (positional_.size() < spec.min_positional) {
    error_ = spec.positional.empty() ? "missing arguments"
                                     : "missing " + std::string(spec.positional);
    return false;
  }
  if (positional_.size() > spec.max_positional) {
    error_ = "unexpected argument " + quoted(positional_[spec.max_positional]);
    return false;
  }
  return true;
}

void Args::print_help(std::FILE* out) const {
  const CommandSpec& s = *spec_;
  std::fprintf(out, "usage: uroce %.*s [options]%s%.*s\n%.*s\n\noptions:\n", int(s.name.size()),
               s.name.data(), s.positional.empty() ? "" : " ", int(s.positional.size()),
               s.positional.data(), int(s.summary.size()), s.summary.data());
  auto line = [&](char short_name, std::string_view name, std::string_view meta, std::string_view help,
                  const std::string& def) {
    std::string left = short_name ? std::string{'-', short_name, ',', ' '} : std::string(4, ' ');
    left += "--";
    left += name;
    if (!meta.empty()) {
      left += ' ';
      left += meta;
    }
    std::fprintf(out, "  %-28s %.*s%s\n", left.c_str(), int(help.size()), help.data(), def.c_str());
  };
  line('h', "help", "", "print this help and exit", "");
  for (const OptSpec& o : s.options) {
    std::string def;
    switch (o.kind) {
      case OptKind::kFlag: def = " (default: off)"; break;
      case OptKind::kUint:
      case OptKind::kDouble:
        def = " (default: " + std::string(o.def);
        if (o.min != 0 || o.max != std::numeric_limits<uint64_t>::max()) {
          def += "; " + std::to_string(o.min) + ".." + std::to_string(o.max);
        }
        def += ")";
        break;
      case OptKind::kString:
      case OptKind::kChoice:
        def = " (default: " + (o.def.empty() ? std::string("none") : quoted(o.def)) + ")";
        break;
    }
    line(o.short_name, o.name, meta_of(o), o.help, def);
  }
  if (!s.details.empty()) std::fprintf(out, "\n%.*s", int(s.details.size()), s.details.data());
}

std::string Args::config_line() const {
  std::string r;
  for (size_t i = 0; i < spec_->options.size(); ++i) {
    const OptSpec& o = spec_->options[i];
    if (!r.empty()) r += ' ';
    r.append(o.name);
    r += '=';
    if (o.kind == OptKind::kFlag) {
      r += values_[i].on ? "true" : "false";
    } else {
      r.append(values_[i].text);
    }
  }
  return r;
}

std::optional<int> parse_command_line(const CommandSpec& spec, int argc, const char* const* argv,
                                      Args& out) {
  if (out.parse(spec, argc, argv)) return std::nullopt;
  if (out.help_requested()) {
    out.print_help(stdout);
    return kExitOk;
  }
  std::fprintf(stderr, "uroce %.*s: %s (see uroce %.*s --help)\n", int(spec.name.size()), spec.name.data(),
               out.error().c_str(), int(spec.name.size()), spec.name.data());
  return kExitUsage;
}

}  // namespace uroce::apps
