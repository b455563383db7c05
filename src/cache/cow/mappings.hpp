// This process's memory mappings (/proc/self/maps), and whether a range of them can be write-protected
// for a copy-on-write snapshot: only private anonymous memory can (the heap, the stack, anonymous mmap).
// Everything else is copied on the blocking path, for the reason protectable() gives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace cairn::cow {

struct Mapping {
  uint64_t start = 0, end = 0;
  bool readable = false, writable = false, shared = false;
  uint64_t inode = 0;
  std::string path;  // "", "[heap]", "[stack]", "[anon:name]", a file, "/anon_hugepage (deleted)", ...
};

// Parses the text of /proc/<pid>/maps: one mapping per line, sorted by address. A line that does not
// parse is ERR_FORMAT naming it (the kernel's format is stable; a failure means something unexpected).
Result<std::vector<Mapping>> parse_mappings(std::string_view text);
Result<std::vector<Mapping>> read_mappings();
// Only the mappings overlapping the given ranges, sorted: asked of the kernel one by one
// (PROCMAP_QUERY, Linux 6.11) rather than read as the whole text, which in an MPI process with its
// hundreds of libraries costs half a millisecond; read_mappings() on older kernels.
Result<std::vector<Mapping>> mappings_in(const std::vector<std::pair<uint64_t, uint64_t>>& ranges);

// Empty when every page of [start, end) lies in private anonymous writable mappings; otherwise why
// write-protection cannot cover the range ("shared memory", "file-backed memory (/path)", ...).
std::string unprotectable_reason(const std::vector<Mapping>& maps, uint64_t start, uint64_t end);

// Whether [start, end) is mapped and readable throughout (what a copy needs).
bool readable(const std::vector<Mapping>& maps, uint64_t start, uint64_t end);

}  // namespace cairn::cow
