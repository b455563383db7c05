// Logging: CAIRN_LOG=error|warn|info|debug (the `log` knob); lines go to stderr with the rank in front.
#pragma once

#include <string>

namespace cairn::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

void set_level(Level level);
Level level();
// Parse "error"|"warn"|"info"|"debug"; false if unknown.
bool parse_level(const std::string& text, Level* out);
void set_rank(int rank);
// For the daemons (cairnd): the word lines start with instead of "cairn" ("cairnd agent 7[4242]"), and a
// local date and time in front of every line. Set once at start, before other threads log.
void set_tag(const std::string& tag);
void set_timestamps(bool on);

void write(Level level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace cairn::log

#define CAIRN_LOG_AT(lvl, ...)                                       \
  do {                                                               \
    if (static_cast<int>(lvl) <= static_cast<int>(::cairn::log::level())) \
      ::cairn::log::write(lvl, __VA_ARGS__);                         \
  } while (0)
#define LOG_ERROR(...) CAIRN_LOG_AT(::cairn::log::Level::error, __VA_ARGS__)
#define LOG_WARN(...) CAIRN_LOG_AT(::cairn::log::Level::warn, __VA_ARGS__)
#define LOG_INFO(...) CAIRN_LOG_AT(::cairn::log::Level::info, __VA_ARGS__)
#define LOG_DEBUG(...) CAIRN_LOG_AT(::cairn::log::Level::debug, __VA_ARGS__)
