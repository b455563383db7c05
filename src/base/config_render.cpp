// Renderings of the knob table (knob_table.hpp): the KnobInfo listing, `cairn config --list`, the docs'
// markdown table (docs/config.md) and the commented sample config (docs/cairn.toml.sample).
#include <algorithm>
#include <sstream>

#include "base/config.hpp"
#include "base/knob_table.hpp"

namespace cairn {

using namespace knob;

const std::vector<KnobInfo>& knob_table() {
  static const std::vector<KnobInfo> table = [] {
    std::vector<KnobInfo> out;
    for (const Knob& k : knobs())
      out.push_back({k.name, env_name(k), type_name(k.kind),
                     k.default_doc ? k.default_doc : k.default_text, accepted(k), k.description});
    return out;
  }();
  return table;
}

std::string render_knob_list(const Config& effective, const std::vector<std::string>& origins) {
  size_t width = 0;
  for (const Knob& k : knobs()) width = std::max(width, std::string(k.name).size());
  std::string out;
  for (size_t i = 0; i < knobs().size(); ++i) {
    const Knob& k = knobs()[i];
    std::string line = k.name;
    line.resize(width, ' ');
    line += " = " + format_toml(k, load(effective, k));
    if (i < origins.size() && !origins[i].empty()) {
      line.resize(std::max(line.size(), width + 24), ' ');
      line += "  # " + origins[i];
    }
    out += line + "\n";
  }
  return out;
}

std::vector<std::string> knob_values_toml(const Config& effective) {
  std::vector<std::string> out;
  for (const Knob& k : knobs()) out.push_back(format_toml(k, load(effective, k)));
  return out;
}

std::string render_knob_list(const LoadedConfig& loaded) {
  return render_knob_list(loaded.config, loaded.origins);
}

std::string render_knob_markdown() {
  std::string out =
      "| knob | environment | type | default | accepted | description |\n"
      "|---|---|---|---|---|---|\n";
  for (const Knob& k : knobs()) {
    std::string def = k.default_doc ? k.default_doc : "`" + std::string(k.default_text) + "`";
    std::string acc = accepted(k, true);
    out += "| `" + std::string(k.name) + "` | `" + env_name(k) + "` | " + type_name(k.kind) +
           " | " + def + " | " + acc + " | " + k.description + " |\n";
  }
  return out;
}

std::string render_sample_toml() {
  std::string out =
      "# cairn sample configuration: every knob at its default, commented out.\n"
      "# Uncomment and edit what you need. Precedence: CAIRN_* environment variables over this\n"
      "# file over the defaults. Pass the file to cairn_init() or name it in CAIRN_CONFIG.\n"
      "# The same keys may also be written under a [cairn] table. Reference: docs/config.md.\n";
  for (const Knob& k : knobs()) {
    out += "\n";
    // The description, wrapped at 100 columns.
    std::istringstream words(k.description);
    std::string word, line = "#";
    while (words >> word) {
      if (line.size() + 1 + word.size() > 100) out += line + "\n", line = "#";
      line += " " + word;
    }
    out += line + "\n";
    std::string acc = accepted(k);
    out += "# type: " + std::string(type_name(k.kind)) + (acc.empty() ? "" : "; accepted: " + acc) +
           "\n# environment: " + env_name(k) + "\n";
    Value def = std::get<Value>(from_text(k, k.default_text));
    out += "# " + std::string(k.name) + " = " + format_toml(k, def) + "\n";
  }
  return out;
}

}  // namespace cairn
