// Paths as strings, without asking the file system: what the SCR library and the interposer need to
// compare a name the application gives with a directory or a pattern, whatever the working directory
// and however the name is spelled ("./a//b/../c").
#pragma once

#include <string>
#include <string_view>

namespace cairn::paths {

// `path` made absolute against `cwd` (itself absolute) and normalised: no "." or ".." components, no
// repeated or trailing '/'. ".." above the root stays at the root, as the kernel does. Symbolic links
// are not resolved.
std::string absolute(std::string_view path, std::string_view cwd);
// The process's working directory ("/" if it cannot be read).
std::string current_dir();
// absolute(path, current_dir()).
std::string absolute(std::string_view path);
// Whether normalised absolute `path` is `dir` or lies below it.
bool is_under(std::string_view path, std::string_view dir);
// The last component ("" for "/") and everything before it ("/" for "/x").
std::string base_name(std::string_view path);
std::string dir_name(std::string_view path);

}  // namespace cairn::paths
