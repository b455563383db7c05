// CAIRN_INTERPOSE_PATTERN: which files of an unmodified code are its checkpoint files, and which step
// (version) each belongs to. Pure; no file system access. Syntax (docs/interpose.md):
//   %d   the step: one or more decimal digits (leading zeros allowed); exactly one per pattern
//   %r   one or more decimal digits (by convention the writer's rank); at most one
//   *    any characters except '/', possibly none
//   %%   a literal '%'
//   anything else matches itself. Several patterns are separated by ','. A relative pattern is taken
//   from the working directory at MPI_Init; both it and the path are compared after lexical
//   normalisation ("./", "//", "..").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::interpose {

struct Match {
  uint64_t step = 0;
  std::string slot;  // the path with the step's digits taken out: the same file in another step
};

class Pattern {
 public:
  // Parses `text` (a comma-separated list) against `cwd`; nullopt with *error for a bad pattern.
  static std::optional<Pattern> parse(std::string_view text, std::string_view cwd, std::string* error);
  // Whether the normalised absolute `path` is a checkpoint file, and of which step.
  std::optional<Match> match(std::string_view path) const;
  const std::string& text() const { return text_; }

 private:
  enum class Kind { literal, step, rank, star };
  struct Token {
    Kind kind;
    std::string text;  // literal only
  };
  using Tokens = std::vector<Token>;
  static bool match_tokens(const Tokens& t, size_t ti, std::string_view s, size_t si, Match* m, size_t* step_at,
                           size_t* step_len);
  std::vector<Tokens> alternatives_;
  std::string text_;
};

}  // namespace cairn::interpose
