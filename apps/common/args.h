// The one command-line parser every `uroce` subcommand uses (dump, demo, perf,
// pingpong, sim, ...), in the manner of perftest and DPDK's examples: each
// command declares a constexpr table of options (long name, optional short
// name, kind, default, help) and the parser does the rest. `--help` lists every
// option with its default; a usage error is one line on stderr and exit code 2.
// Numbers are parsed strictly: "12x", "", "+1", " 1" and overflow are errors.
// Control path only: allocation is fine here.
//
// Accepted syntax (getopt_long-like):
//   --name VALUE   --name=VALUE   -n VALUE   -nVALUE     options with a value
//   --name         -n                                    flags (no value)
//   --                                                   ends options
//   anything else (including a lone "-")                 positional argument
// The last occurrence of a repeated option wins.
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace uroce::apps {

/// Process exit codes shared by all subcommands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  ///< the command ran and found a failure
inline constexpr int kExitUsage = 2;    ///< bad command line

enum class OptKind : uint8_t {
  kFlag,    ///< no value; false unless given
  kUint,    ///< unsigned decimal or 0x-hex, within [min, max]
  kDouble,  ///< finite decimal floating point, within [min, max] (as doubles)
  kString,  ///< any text
  kChoice,  ///< one of the '|'-separated words in `choices`
};

/// One option of a command. Declare with designated initializers:
///   {.name = "size", .short_name = 's', .kind = OptKind::kUint, .def = "65536",
///    .help = "message size, bytes", .min = 1, .max = 1u << 30}
struct OptSpec {
  std::string_view name;           ///< long name, without "--"
  char short_name = 0;             ///< 0: no short form
  OptKind kind = OptKind::kFlag;
  std::string_view def = {};       ///< default, as it would be typed; unused for flags
  std::string_view help = {};
  uint64_t min = 0;                ///< kUint and kDouble: smallest accepted value
  uint64_t max = std::numeric_limits<uint64_t>::max();  ///< kUint and kDouble: largest
  std::string_view choices = {};   ///< kChoice: "rc|uc|ud"
  std::string_view meta = {};      ///< value placeholder in --help; "N", "X", "STR" or choices if empty
};

/// A subcommand's command-line interface.
struct CommandSpec {
  std::string_view name;            ///< "dump": shown as "uroce dump"
  std::string_view positional;      ///< positional arguments in the usage line, e.g. "FILE.pcap..."
  std::string_view summary;         ///< one line: what the command does
  std::span<const OptSpec> options;
  uint32_t min_positional = 0;
  uint32_t max_positional = std::numeric_limits<uint32_t>::max();
  std::string_view details = {};    ///< printed after the option list by --help
};

/// The parsed command line. Values are looked up by long name; asking for a
/// name the command did not declare, or with the wrong kind, is a bug and aborts.
/// Everything but parse() is meaningful only after parse(). Values are views
/// into argv and the option table, which must outlive the Args (as main's do).
class Args {
 public:
  /// Parses argv[1..argc) (argv[0] is the command name) against spec. Returns
  /// true if the command should run; false after --help (help_requested()) or on
  /// a usage error (error() holds a one-line message). Every default in the
  /// table must itself parse; one that does not aborts (a bug in the table).
  bool parse(const CommandSpec& spec, int argc, const char* const* argv);

  bool help_requested() const { return help_; }
  const std::string& error() const { return error_; }

  bool flag(std::string_view name) const;
  uint64_t get_uint(std::string_view name) const;
  double get_double(std::string_view name) const;
  /// Value of a kString or kChoice option.
  std::string_view get_str(std::string_view name) const;
  /// True if the option was on the command line (not just defaulted).
  bool given(std::string_view name) const;
  /// The value of an option of any kind but kFlag as it was typed (its
  /// default's text when not given), e.g. to hand it on in an environment.
  std::string_view text(std::string_view name) const;
  const std::vector<std::string_view>& positional() const { return positional_; }

  /// Writes the --help text: usage line, summary, every option with its default.
  void print_help(std::FILE* out) const;
  /// The effective configuration as "name=value name=value ..." in table order,
  /// for the config echo every app prints at start.
  std::string config_line() const;

 private:
  struct Value {
    bool given = false;
    bool on = false;        // kFlag
    uint64_t u = 0;         // kUint
    double d = 0;           // kDouble
    std::string_view text;  // kString, kChoice, and the text of any value
  };

  size_t index_of(std::string_view name, OptKind kind) const;
  /// Converts text for option i into values_[i]; false with error_ set if invalid.
  bool set_value(size_t i, std::string_view text, std::string_view as_typed);

  const CommandSpec* spec_ = nullptr;
  std::vector<Value> values_;  // parallel to spec_->options
  std::vector<std::string_view> positional_;
  std::string error_;
  bool help_ = false;
};

/// Parses with the standard reactions: on --help prints help to stdout and
/// returns kExitOk; on a usage error prints "uroce NAME: ERROR (see uroce NAME
/// --help)" to stderr and returns kExitUsage; otherwise returns nullopt and the
/// command runs with `out`.
std::optional<int> parse_command_line(const CommandSpec& spec, int argc, const char* const* argv,
                                      Args& out);

/// Strict number parsers, exposed for tests: the whole of text must be the
/// number (decimal, or 0x/0X hex for integers), with no sign, space or suffix.
std::optional<uint64_t> parse_uint(std::string_view text);
std::optional<double> parse_double(std::string_view text);

}  // namespace uroce::apps
