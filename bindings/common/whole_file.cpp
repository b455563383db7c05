#include "whole_file.hpp"

#include <cstdio>

namespace cairn::files {

std::optional<std::string> read_whole_file(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  std::string bytes;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  bool ok = !ferror(f);
  fclose(f);
  if (!ok) return std::nullopt;
  return bytes;
}

}  // namespace cairn::files
