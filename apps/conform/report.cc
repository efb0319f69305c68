// The report of a `uroce conform` run: see report.h.
#include "apps/conform/report.h"

#include "apps/common/json_writer.h"
#include "apps/common/launch.h"

namespace uroce::apps::conform {

namespace {

/// s with the five XML special characters escaped, and control characters dropped.
std::string xml(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (uint8_t(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

/// s with '|' escaped for a Markdown table cell.
std::string cell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

}  // namespace

Verdict wanted(const RunInfo& info) { return info.broken ? Verdict::kDeviates : Verdict::kConforms; }

bool passes(const RunInfo& info, const CaseResult& r) {
  return r.out.verdict == wanted(info) || (!info.strict && r.out.verdict == Verdict::kNotApplicable);
}

void write_markdown(std::FILE* f, const RunInfo& info, std::span<const CaseResult> results) {
  std::fprintf(f, "\n| case | verdict | expected | seen | rule |\n|---|---|---|---|---|\n");
  uint32_t pass = 0;
  for (const CaseResult& r : results) {
    pass += passes(info, r);
    const std::string flagged = info.broken && r.out.verdict == Verdict::kDeviates
                                    ? " (broken variant " + std::string(break_name(r.c->brk)) + " flagged)"
                                    : "";
    std::fprintf(f, "| %s | %s%s | %s | %s | %s |\n", cell(r.c->name).c_str(),
                 std::string(verdict_name(r.out.verdict)).c_str(), flagged.c_str(), cell(r.c->expect).c_str(),
                 cell(r.out.seen).c_str(), cell(r.c->rule).c_str());
  }
  std::fprintf(f, "\n# %u of %zu cases %s (target %s%s; no answer means none within %u ms)\n", pass,
               results.size(),
               info.broken ? "flagged their broken variant" : info.strict ? "conform" : "conform or are not applicable",
               info.target.c_str(), info.broken ? ", broken variants" : "", info.wait_ms);
}

std::string json_report(const RunInfo& info, std::span<const CaseResult> results) {
  JsonWriter w;
  w.begin_object().key("target").str(info.target).key("broken_variants").boolean(info.broken);
  w.key("wait_ms").num(info.wait_ms).key("cases").begin_array();
  for (const CaseResult& r : results) {
    w.newline().begin_object();
    w.key("name").str(r.c->name).key("group").str(r.c->group).key("rule").str(r.c->rule);
    w.key("expected").str(r.c->expect).key("verdict").str(verdict_name(r.out.verdict)).key("seen").str(r.out.seen);
    if (info.broken) w.key("broken_variant").str(break_name(r.c->brk));
    w.key("pass").boolean(passes(info, r)).key("pcap").str(r.pcap).key("ms").fixed(r.ms, 1);
    w.end_object();
  }
  w.end_array().end_object();
  return w.text() + "\n";
}

std::string junit_report(const RunInfo& info, std::span<const CaseResult> results) {
  uint32_t failures = 0, errors = 0, skipped = 0;
  double ms = 0;
  for (const CaseResult& r : results) {
    errors += r.out.verdict == Verdict::kError;
    failures += r.out.verdict != Verdict::kError && !passes(info, r);
    skipped += r.out.verdict == Verdict::kNotApplicable && passes(info, r);
    ms += r.ms;
  }
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += strf("<testsuite name=\"uroce-conform%s\" tests=\"%zu\" failures=\"%u\" errors=\"%u\" skipped=\"%u\" time=\"%.3f\">\n",
            info.broken ? "-broken" : "", results.size(), failures, errors, skipped, ms / 1000);
  s += "  <properties><property name=\"target\" value=\"" + xml(info.target) + "\"/></properties>\n";
  for (const CaseResult& r : results) {
    s += "  <testcase classname=\"" + xml(r.c->group) + "\" name=\"" + xml(r.c->name) + "\"" +
         strf(" time=\"%.3f\">\n", r.ms / 1000);
    const std::string detail = "expected: " + std::string(r.c->expect) + "\nseen: " + r.out.seen +
                               "\nrule: " + std::string(r.c->rule) + (r.pcap.empty() ? "" : "\npcap: " + r.pcap);
    if (r.out.verdict == Verdict::kNotApplicable && passes(info, r)) {
      s += "    <skipped message=\"" + xml(r.out.seen) + "\"/>\n";
    } else if (r.out.verdict == Verdict::kError) {
      s += "    <error message=\"" + xml(r.out.seen) + "\">" + xml(detail) + "</error>\n";
    } else if (!passes(info, r)) {
      s += "    <failure message=\"" + xml(std::string(verdict_name(r.out.verdict)) + ": " + r.out.seen) + "\">" +
           xml(detail) + "</failure>\n";
    }
    s += "    <system-out>" + xml(detail) + "</system-out>\n  </testcase>\n";
  }
  s += "</testsuite>\n";
  return s;
}

}  // namespace uroce::apps::conform
