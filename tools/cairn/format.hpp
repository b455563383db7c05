// How the `cairn` command writes sizes, durations, times, rates and rank lists, and reads a version
// argument: shared by every room of the command (launch, inspect, maintain, migrate).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cairn::tool {

int64_t now_unix_ns();
std::string format_bytes(uint64_t bytes);                 // "128.0 KiB"
std::string format_duration(double seconds);              // "850 ms", "12 s", "3 min", "2.5 h", "4.1 d"
std::string format_utc(int64_t unix_ns);                  // "2026-11-23 10:15:01 UTC"
std::string format_rate(uint64_t bytes, double seconds);  // "1.25 GB/s"; "-" when seconds <= 0
std::string hex64(uint64_t v);                            // "0x0123456789abcdef"
// "9" or "v00000009" (an L3 directory name) into 9; false otherwise.
bool parse_version_arg(const std::string& text, uint64_t* version);
// "rank 2 (node1/r2)" style ranges: "0-3,6".
std::string rank_ranges(std::vector<uint32_t> ranks);

}  // namespace cairn::tool
