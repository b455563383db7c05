// `cairn strerror CODE | --list | --markdown`: the error taxonomy on the command line, from the one
// X-macro list in include/cairn/cairn_errors.h.
#include <cctype>
#include <charconv>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cairn/cairn_errors.h"
#include "commands.hpp"
#include "common.hpp"

namespace cairn::tool {
namespace {

struct ErrorEntry {
  const char* name;  // "ERR_IO"
  int value;
  const char* text;
};

constexpr ErrorEntry kErrors[] = {
#define CAIRN_X_ENTRY(name, value, text) {#name, value, text},
    CAIRN_ERROR_LIST(CAIRN_X_ENTRY)
#undef CAIRN_X_ENTRY
};

std::string describe(const ErrorEntry& e) {
  return "CAIRN_" + std::string(e.name) + " (" + std::to_string(e.value) + "): " + e.text;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  return s;
}

// "-5", "ERR_IO", "CAIRN_ERR_IO" (any case); nullptr when nothing matches.
const ErrorEntry* find_error(const std::string& word) {
  int value = 0;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec == std::errc() && end == word.data() + word.size()) {
    for (const auto& e : kErrors)
      if (e.value == value) return &e;
    return nullptr;
  }
  std::string name = upper(word);
  if (name.rfind("CAIRN_", 0) == 0) name = name.substr(6);
  for (const auto& e : kErrors)
    if (name == e.name) return &e;
  return nullptr;
}

std::string markdown_table() {
  std::string out = "| Code | Name | Meaning |\n|---:|---|---|\n";
  for (const auto& e : kErrors)
    out += "| " + std::to_string(e.value) + " | `CAIRN_" + e.name + "` | " + e.text + " |\n";
  return out;
}

nlohmann::json entry_json(const ErrorEntry& e) {
  return {{"code", e.value}, {"name", "CAIRN_" + std::string(e.name)}, {"message", e.text}};
}

struct StrerrorOptions {
  std::string code;
  bool list = false;
  bool markdown = false;
  bool json = false;
};

}  // namespace

Command add_strerror_command(CLI::App& root) {
  auto opts = std::make_shared<StrerrorOptions>();
  CLI::App* app = root.add_subcommand("strerror", "Explain a cairn error code (or list them all).");
  app->add_option("code", opts->code, "The code: its number (-5) or its name (ERR_IO, CAIRN_ERR_IO)");
  auto* list = app->add_flag("--list", opts->list, "Print every code, one per line");
  auto* md = app->add_flag("--markdown", opts->markdown, "Print every code as a Markdown table (docs/errors.md)");
  auto* json = app->add_flag("--json", opts->json,
                             "Print JSON: {\"code\", \"name\", \"message\"}, or with --list an array of them");
  list->excludes(md);
  json->excludes(md);
  app->footer("Output: NAME (VALUE): DESCRIPTION, e.g. 'CAIRN_ERR_IO (-5): I/O error'.\n"
              "Exit status: 0, or 2 for an unknown code.");

  return {app, [opts](const Invocation&) {
    if (opts->list || opts->markdown) {
      if (!opts->code.empty()) {
        print_error("strerror", "give a code or --list/--markdown, not both");
        return kExitUsage;
      }
      if (opts->markdown) {
        fputs(markdown_table().c_str(), stdout);
      } else if (opts->json) {
        nlohmann::json all = nlohmann::json::array();
        for (const auto& e : kErrors) all.push_back(entry_json(e));
        printf("%s\n", all.dump(2).c_str());
      } else {
        for (const auto& e : kErrors) printf("%s\n", describe(e).c_str());
      }
      return kExitOk;
    }
    if (opts->code.empty()) {
      print_error("strerror", "which code? (cairn strerror -5, cairn strerror ERR_IO, cairn strerror --list)");
      return kExitUsage;
    }
    const ErrorEntry* e = find_error(opts->code);
    if (!e) {
      std::string hint = "cairn strerror --list shows them all";
      if (!opts->code.empty() && isdigit(static_cast<unsigned char>(opts->code[0])) &&
          find_error("-" + opts->code))
        hint = "cairn error codes are negative: did you mean -" + opts->code + "?";
      print_error("strerror", "unknown error code '" + opts->code + "' (" + hint + ")");
      return kExitUsage;
    }
    if (opts->json)
      printf("%s\n", entry_json(*e).dump(2).c_str());
    else
      printf("%s\n", describe(*e).c_str());
    return kExitOk;
  }};
}

}  // namespace cairn::tool
