// A small file read whole: a config file, an index. nullopt when it cannot be opened or read (errno set).
#pragma once

#include <optional>
#include <string>

namespace cairn::files {

std::optional<std::string> read_whole_file(const std::string& path);

}  // namespace cairn::files
