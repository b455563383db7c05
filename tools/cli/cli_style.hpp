// How every program's command line looks and ends (cairn, cairnd, cairn-bench): help that shows an
// option's names, its value's type and its default -- not CLI11's internals (validator descriptions,
// "{false}" on a negated flag) -- and one exit status for a bad command line, 2, as docs/tools.md and
// docs/service.md promise (CLI11's own are 105, 106, 109, ...).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

namespace cairn::cli {

constexpr int kExitUsage = 2;

class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter() { column_width(34); }

  // "--scavenge, --no-scavenge", "-v, --verbose": the names only.
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    if (is_positional) return opt->get_name(true, false);
    std::string names;
    for (const auto& s : opt->get_snames()) names += (names.empty() ? "-" : ", -") + s;
    for (const auto& l : opt->get_lnames()) names += (names.empty() ? "--" : ", --") + l;
    for (const auto& f : opt->get_fnames()) {  // negated flags ("!--no-x") appear here too
      std::string dashed = (f.size() == 1 ? "-" : "--") + f;
      if (names.find(dashed) == std::string::npos) names += ", " + dashed;
    }
    return names;
  }

  // " TYPE" and " ..." for repeatable options: the type as the option names it, without the
  // descriptions CLI11 appends for its validators (":INT in [1 - 4096]", ":{a,b}", ":SIZE [b, kb...]").
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (opt->get_type_size() == 0) return "";
    std::string type = opt->get_type_name();
    type = type.substr(0, type.find(':'));
    std::string out = type.empty() ? "" : " " + type;
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    if (opt->get_required()) out += " (required)";
    return out;
  }

  // The description, then "(default: X)" when the option has a default to show and does not say it.
  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string desc = opt->get_description();
    const std::string def = opt->get_default_str();
    if (!def.empty() && opt->get_type_size() != 0 && desc.find("default") == std::string::npos)
      desc += (desc.empty() ? "" : " ") + std::string("(default: ") + def + ")";
    return desc;
  }
};

// The help style for `app` and the subcommands added to it afterwards (they copy the formatter).
inline void use_help_style(CLI::App& app) { app.formatter(std::make_shared<HelpFormatter>()); }

// Parses argv. Returns -1 when the program goes on; otherwise the exit status: 0 after --help or
// --version (printed), 2 for a bad command line, said in one line "<tag>: <message> (see '<tag> --help')".
inline int parse_command_line(CLI::App& app, int argc, char** argv, const std::string& tag) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string what = e.what();
    for (char& c : what)
      if (c == '\n') c = ' ';
    while (!what.empty() && what.back() == ' ') what.pop_back();
    fprintf(stderr, "%s: %s (see '%s --help')\n", tag.c_str(), what.c_str(), tag.c_str());
    return kExitUsage;
  }
  return -1;
}

}  // namespace cairn::cli
