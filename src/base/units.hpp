// One way to write sizes and durations, everywhere: the knobs (environment and config file), every
// `cairn` tool, cairnd and cairn-bench parse them here (docs/config.md, "Sizes and durations").
//
//   size      a number of bytes, optionally with a binary unit, case-insensitive: B; K, KB, KiB (1024);
//             M, MB, MiB; G, GB, GiB; T, TB, TiB. A fraction is allowed before a unit when the result
//             is a whole number of bytes ("1.5K" = 1536; "0.3K" is refused). "4096", "64K", "1MiB", "2 G".
//   duration  seconds, or numbers with units, case-insensitive: ms, s (sec), m (min), h, d, w; parts may
//             follow each other ("1h30m", "2m30s"); a number may have an exponent ("1e3", as the knobs'
//             plain numbers always could). "90", "0.5", "90s", "15m", "24h", "1h30m".
//
// Both accept spaces around the number and between a number and its unit, nothing else; no sign.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace cairn::units {

// Bytes; ERR_INVALID_ARG naming the text and what is accepted, or when it exceeds `max`.
Result<uint64_t> parse_size(std::string_view text, uint64_t max = UINT64_MAX);
// Seconds (finite, >= 0); ERR_INVALID_ARG naming the text and what is accepted.
Result<double> parse_duration(std::string_view text);
// A duration that must be whole seconds (a time limit, a halt margin): ERR_INVALID_ARG for "1.5s".
Result<int64_t> parse_whole_seconds(std::string_view text);

// The shortest exact text: "1G", "64K", "1536", "0".
std::string format_size(uint64_t bytes);
// Seconds as the shortest exact text of the duration syntax: "90" -> "90s", 5400 -> "1h30m", 0.25 -> "250ms".
std::string format_duration(double seconds);

// What each accepts, for help texts and errors.
constexpr const char* kSizeSyntax = "bytes, or with a unit: K, M, G, T (binary; KB, KiB ... alike)";
constexpr const char* kDurationSyntax = "seconds, or with units: ms, s, m, h, d, w (e.g. 90s, 15m, 1h30m)";

}  // namespace cairn::units
