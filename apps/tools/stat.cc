// `uroce stat`: the DPDK telemetry of a running uroce process, as tables. It
// connects to the process's telemetry socket (the one dpdk-telemetry.py
// uses: <runtime dir>/dpdk_telemetry.v2[:instance], the runtime dir of the
// process's --file-prefix as EAL finds it, uroce::eal_runtime_dir), sends
// the /uroce/* commands (stack/device/telemetry.cc) and prints ports, QPs
// (state and PSNs), counters and congestion-control state. --json prints
// the replies themselves, as one JSON object.
// Exit: 0 ok, 1 no such process or socket, or a reply could not be read.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <uroce/eal.h>

#include "apps/commands.h"
#include "apps/common/args.h"
#include "apps/common/json_writer.h"

namespace uroce::apps {
namespace {

constexpr OptSpec kStatOptions[] = {
    {.name = "file-prefix", .kind = OptKind::kString, .def = "rte", .help = "EAL --file-prefix of the process", .meta = "P"},
    {.name = "instance", .short_name = 'i', .kind = OptKind::kUint, .def = "0", .help = "telemetry instance (dpdk_telemetry.v2:N) when several processes share the prefix", .max = 1000},
    {.name = "socket", .kind = OptKind::kString, .def = "", .help = "telemetry socket path (overrides --file-prefix and --instance)", .meta = "PATH"},
    {.name = "all", .short_name = 'a', .help = "list every counter, not only the non-zero ones"},
    {.name = "json", .help = "print the telemetry replies as one JSON object"},
};

constexpr CommandSpec kStatCommand = {
    .name = "stat",
    .positional = "",
    .summary = "print ports, QPs, counters and congestion-control state of a running uroce process (DPDK telemetry)",
    .options = kStatOptions,
    .max_positional = 0,
    .details =
        "The process must run with DPDK telemetry (the default; not --no-telemetry). The\n"
        "same data: dpdk-telemetry.py -f PREFIX, then /uroce/ports, /uroce/qps,\n"
        "/uroce/qp,[DEV,]QPN, /uroce/counters[,DEV], /uroce/cc[,DEV]. PSNs are shown in hex.\n",
};

// ---------------------------------------------------------------- a small JSON reader
// Enough for telemetry replies: objects (insertion order kept), arrays,
// strings (escapes \" \\ \/ \n \t; \u as '?'), numbers, true/false/null.
struct Json {
  enum class Kind : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool b = false;
  std::string text;  // number as written, or string
  std::vector<Json> items;        // array elements, or object member values
  std::vector<std::string> keys;  // object: keys[i] names items[i]

  const Json* get(std::string_view k) const {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == k) return &items[i];
    }
    return nullptr;
  }
  void add(std::string k, Json v) {
    keys.push_back(std::move(k));
    items.push_back(std::move(v));
  }
  std::string str() const {
    switch (kind) {
      case Kind::kNull: return "-";
      case Kind::kBool: return b ? "true" : "false";
      case Kind::kNumber:
      case Kind::kString: return text;
      case Kind::kArray:
      case Kind::kObject: return "...";
    }
    return "";
  }
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view s) : s_(s) {}
  bool read(Json& out) {
    if (!value(out)) return false;
    ws();
    return i_ == s_.size();
  }

 private:
  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool lit(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }
  bool string(std::string& out) {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    for (++i_; i_ < s_.size(); ++i_) {
      char c = s_[i_];
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c == '\\' && i_ + 1 < s_.size()) {
        c = s_[++i_];
        if (c == 'n') c = '\n';
        else if (c == 't') c = '\t';
        else if (c == 'u') {
          i_ += 4;
          c = '?';
        }
      }
      out.push_back(c);
    }
    return false;
  }
  bool value(Json& v) {
    ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') {
      v.kind = Json::Kind::kObject;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
      for (;;) {
        ws();
        std::string k;
        Json m;
        if (!string(k)) return false;
        ws();
        if (!lit(":") || !value(m)) return false;
        v.add(std::move(k), std::move(m));
        ws();
        if (lit("}")) return true;
        if (!lit(",")) return false;
      }
    }
    if (c == '[') {
      v.kind = Json::Kind::kArray;
      ++i_;
      ws();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
      for (;;) {
        Json m;
        if (!value(m)) return false;
        v.items.push_back(std::move(m));
        ws();
        if (lit("]")) return true;
        if (!lit(",")) return false;
      }
    }
    if (c == '"') {
      v.kind = Json::Kind::kString;
      return string(v.text);
    }
    if (lit("true")) return v.kind = Json::Kind::kBool, v.b = true, true;
    if (lit("false")) return v.kind = Json::Kind::kBool, true;
    if (lit("null")) return true;
    const size_t start = i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' || s_[i_] == '+' ||
                              s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
    }
    if (i_ == start) return false;
    v.kind = Json::Kind::kNumber;
    v.text = std::string(s_.substr(start, i_ - start));
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
};

// ---------------------------------------------------------------- the telemetry client

class Telemetry {
 public:
  ~Telemetry() {
    if (fd_ >= 0) close(fd_);
  }
  /// Connects and reads the greeting (version, pid, max_output_len).
  bool open(const std::string& path, std::string& err) {
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) return err = "socket path too long: " + path, false;
    path.copy(sa.sun_path, path.size());
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      err = "cannot connect to " + path + " (is the process running, with this --file-prefix, and telemetry on?)";
      return false;
    }
    Json hello;
    if (!read_reply(1024, hello, err)) return false;
    if (const Json* m = hello.get("max_output_len")) max_len_ = std::strtoul(m->text.c_str(), nullptr, 10);
    if (const Json* p = hello.get("pid")) pid_ = p->str();
    if (const Json* v = hello.get("version")) version_ = v->str();
    return true;
  }
  /// Sends cmd and returns the value under its name in the reply.
  bool query(const std::string& cmd, Json& out, std::string& raw, std::string& err) {
    if (send(fd_, cmd.data(), cmd.size(), 0) != ssize_t(cmd.size())) return err = "send failed", false;
    Json reply;
    if (!read_reply(max_len_, reply, err, &raw)) return false;
    const std::string name = cmd.substr(0, cmd.find(','));
    const Json* v = reply.get(name);
    if (!v) return err = "no '" + name + "' in the reply (not a uroce process?): " + raw, false;
    out = *v;
    return true;
  }
  const std::string& pid() const { return pid_; }
  const std::string& version() const { return version_; }

 private:
  bool read_reply(size_t cap, Json& out, std::string& err, std::string* raw = nullptr) {
    std::string buf(cap + 1, '\0');
    const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
    if (n <= 0) return err = "no reply from the telemetry socket", false;
    buf.resize(size_t(n));
    if (raw) *raw = buf;
    if (!JsonReader(buf).read(out)) return err = "unreadable telemetry reply: " + buf, false;
    return true;
  }
  int fd_ = -1;
  size_t max_len_ = 16384;
  std::string pid_, version_;
};

// A table: header row, then rows; each column as wide as its widest cell.
void print_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (const auto& r : rows) w[c] = std::max(w[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    std::string s;
    for (size_t c = 0; c < r.size(); ++c) {
      s += (c ? "  " : " ") + r[c] + std::string(w[c] - r[c].size(), ' ');
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::printf("%s\n", s.c_str());
  };
  line(head);
  for (const auto& r : rows) line(r);
}

std::string hex_psn(const Json* v) {
  if (!v || v->kind != Json::Kind::kNumber) return "-";
  char b[16];
  std::snprintf(b, sizeof b, "0x%06lx", std::strtoul(v->text.c_str(), nullptr, 10));
  return b;
}

// Rows of a dict of dicts: one row per member, columns as given (PSN columns in hex).
std::vector<std::vector<std::string>> rows_of(const Json& dict, const std::vector<std::string>& cols,
                                              const std::vector<std::string>& psn_cols, bool key_first) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < dict.keys.size(); ++i) {
    const Json& obj = dict.items[i];
    std::vector<std::string> r;
    if (key_first) r.push_back(dict.keys[i]);
    for (const auto& c : cols) {
      const Json* v = obj.get(c);
      bool psn = false;
      for (const auto& p : psn_cols) psn |= p == c;
      r.push_back(psn ? hex_psn(v) : v ? v->str() : "-");
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace

int cmd_stat(int argc, char** argv) {
  Args args;
  if (auto rc = parse_command_line(kStatCommand, argc, argv, args)) return *rc;
  std::string path(args.get_str("socket"));
  if (path.empty()) {
    path = eal_runtime_dir(std::string(args.get_str("file-prefix"))) + "/dpdk_telemetry.v2";
    if (const uint64_t inst = args.get_uint("instance")) path += ":" + std::to_string(inst);
  }
  Telemetry t;
  std::string err;
  if (!t.open(path, err)) {
    std::fprintf(stderr, "uroce stat: %s\n", err.c_str());
    return kExitFailure;
  }
  const char* kCmds[] = {"/uroce/ports", "/uroce/qps", "/uroce/counters", "/uroce/cc"};
  std::map<std::string, Json> r;
  JsonWriter w;  // --json: the replies' members merged into one object
  w.begin_object();
  for (const char* c : kCmds) {
    std::string raw;
    if (!t.query(c, r[c], raw, err)) {
      std::fprintf(stderr, "uroce stat: %s: %s\n", c, err.c_str());
      return kExitFailure;
    }
    // raw is {"/uroce/x":VALUE}, the command its one key (no ':' in it).
    const size_t colon = raw.find(':');
    w.key(c).raw(std::string_view(raw).substr(colon + 1, raw.size() - colon - 2));
  }
  if (args.flag("json")) {
    std::printf("%s\n", w.end_object().text().c_str());
    return kExitOk;
  }
  std::printf("# uroce stat: %s (pid %s, %s)\n", path.c_str(), t.pid().c_str(), t.version().c_str());

  std::printf("\nports\n");
  print_table({"dev", "mac", "mtu", "max_path_mtu", "engine", "engines", "qps", "gid0"},
              rows_of(r["/uroce/ports"], {"mac", "mtu", "max_path_mtu", "engine", "engines", "qps", "gid0"}, {}, true));

  std::printf("\nqps (PSNs in hex)\n");
  const std::vector<std::string> qcols = {"dev", "qpn", "type", "state", "dest_qpn", "path_mtu", "sq_psn", "next_psn",
                                          "una_psn", "epsn", "msn", "outstanding_wqes", "retry_left", "rnr_left",
                                          "rnr_wait"};
  print_table(qcols, rows_of(r["/uroce/qps"], qcols, {"sq_psn", "next_psn", "una_psn", "epsn"}, false));

  std::printf("\ncounters%s\n", args.flag("all") ? "" : " (non-zero)");
  std::vector<std::vector<std::string>> crows;
  const Json& counters = r["/uroce/counters"];
  for (size_t i = 0; i < counters.keys.size(); ++i) {
    if (args.flag("all") || counters.items[i].str() != "0") crows.push_back({counters.keys[i], counters.items[i].str()});
  }
  print_table({"counter", "value"}, crows);

  // /uroce/cc holds "dev<N>" members (device configuration, CNP counters) and "<dev>_<qpn>" members (QPs).
  Json cc_devs, cc_qps;
  const Json& cc = r["/uroce/cc"];
  for (size_t i = 0; i < cc.keys.size(); ++i) {
    (cc.keys[i].rfind("dev", 0) == 0 ? cc_devs : cc_qps).add(cc.keys[i], cc.items[i]);
  }
  std::printf("\ncongestion control\n");
  const std::vector<std::string> dcols = {"algorithm", "line_rate_mbps", "ecn", "np_enabled", "rcvd_cnp",
                                          "rp_cnp_handled", "np_ecn_marked_roce_packets", "np_cnp_sent"};
  std::vector<std::string> dhead = {"dev"};
  dhead.insert(dhead.end(), dcols.begin(), dcols.end());
  print_table(dhead, rows_of(cc_devs, dcols, {}, true));
  std::printf("\ncongestion control per QP\n");
  const std::vector<std::string> ccols = {"dev", "qpn", "algorithm", "rate_mbps", "target_rate_mbps", "alpha_1024",
                                          "stage", "rtt_samples", "last_rtt_ns"};
  print_table(ccols, rows_of(cc_qps, ccols, {}, false));
  return kExitOk;  // main checks that stdout was written
}

}  // namespace uroce::apps
