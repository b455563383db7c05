#include "lexical_path.hpp"

#include <unistd.h>

#include <vector>

namespace cairn::paths {

std::string absolute(std::string_view path, std::string_view cwd) {
  std::vector<std::string_view> parts;
  auto add = [&](std::string_view p) {
    size_t i = 0;
    while (i <= p.size()) {
      size_t j = p.find('/', i);
      if (j == std::string_view::npos) j = p.size();
      std::string_view c = p.substr(i, j - i);
      if (c == "..") {
        if (!parts.empty()) parts.pop_back();
      } else if (!c.empty() && c != ".") {
        parts.push_back(c);
      }
      i = j + 1;
    }
  };
  if (path.empty() || path[0] != '/') add(cwd);
  add(path);
  std::string out;
  for (auto c : parts) {
    out += '/';
    out += c;
  }
  return out.empty() ? "/" : out;
}

std::string current_dir() {
  std::string buf(4096, '\0');
  while (!getcwd(buf.data(), buf.size())) {
    if (buf.size() > (1u << 20)) return "/";
    buf.resize(buf.size() * 2);
  }
  return std::string(buf.c_str());
}

std::string absolute(std::string_view path) { return absolute(path, current_dir()); }

bool is_under(std::string_view path, std::string_view dir) {
  if (dir == "/") return !path.empty() && path[0] == '/';
  if (path.size() < dir.size() || path.compare(0, dir.size(), dir) != 0) return false;
  return path.size() == dir.size() || path[dir.size()] == '/';
}

std::string base_name(std::string_view path) {
  size_t s = path.find_last_of('/');
  return std::string(s == std::string_view::npos ? path : path.substr(s + 1));
}

std::string dir_name(std::string_view path) {
  size_t s = path.find_last_of('/');
  if (s == std::string_view::npos) return ".";
  if (s == 0) return "/";
  return std::string(path.substr(0, s));
}

}  // namespace cairn::paths
