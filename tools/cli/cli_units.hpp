// Sizes and durations on the command line of every program (cairn, cairnd, cairn-bench): CLI11
// transforms that read an option's text with base/units.hpp, the parser of the knobs, and hand CLI11 the
// number ("64K" -> "65536", "15m" -> "900"), so that an option accepts exactly what the matching knob
// accepts. They add nothing to the help's type name (the option's type_name says SIZE or DURATION).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

#include "base/units.hpp"

namespace cairn::cli {

// A size option: bytes, or with a unit (units::parse_size), within [min, max].
inline CLI::Validator size_value(uint64_t min = 0, uint64_t max = UINT64_MAX) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        auto bytes = units::parse_size(text, max);
        if (!bytes) return bytes.status().message();
        if (*bytes < min) return "'" + text + "' is below the least accepted, " + units::format_size(min);
        text = std::to_string(*bytes);
        return "";
      },
      "", "SIZE");
}

// A duration option: seconds, or with units (units::parse_duration); the option receives seconds.
inline CLI::Validator duration_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto seconds = units::parse_duration(text);
        if (!seconds) return seconds.status().message();
        char buf[64];
        snprintf(buf, sizeof buf, "%.17g", *seconds);
        text = buf;
        return "";
      },
      "", "DURATION");
}

}  // namespace cairn::cli
