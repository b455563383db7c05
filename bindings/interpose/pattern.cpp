#include "pattern.hpp"

#include "common/lexical_path.hpp"

namespace cairn::interpose {

std::optional<Pattern> Pattern::parse(std::string_view text, std::string_view cwd, std::string* error) {
  Pattern p;
  p.text_ = std::string(text);
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view one = text.substr(start, comma - start);
    start = comma + 1;
    if (one.empty()) {
      *error = "empty pattern in '" + std::string(text) + "'";
      return std::nullopt;
    }
    std::string abs = paths::absolute(one, cwd);
    Tokens tokens;
    int steps = 0, ranks = 0;
    for (size_t i = 0; i < abs.size(); ++i) {
      char c = abs[i];
      if (c == '*') {
        if (!tokens.empty() && tokens.back().kind == Kind::star) continue;  // ** is *
        tokens.push_back({Kind::star, {}});
      } else if (c == '%') {
        char n = i + 1 < abs.size() ? abs[i + 1] : '\0';
        ++i;
        if (n == 'd') {
          ++steps;
          tokens.push_back({Kind::step, {}});
        } else if (n == 'r') {
          ++ranks;
          tokens.push_back({Kind::rank, {}});
        } else if (n == '%') {
          if (tokens.empty() || tokens.back().kind != Kind::literal) tokens.push_back({Kind::literal, {}});
          tokens.back().text += '%';
        } else {
          *error = "'" + std::string(one) + "': '%" + std::string(n ? 1 : 0, n) +
                   "' is not %d (the step), %r (the rank) or %% (a '%')";
          return std::nullopt;
        }
      } else {
        if (tokens.empty() || tokens.back().kind != Kind::literal) tokens.push_back({Kind::literal, {}});
        tokens.back().text += c;
      }
    }
    if (steps != 1) {
      *error = "'" + std::string(one) + "' must hold exactly one %d (the step the file belongs to)";
      return std::nullopt;
    }
    if (ranks > 1) {
      *error = "'" + std::string(one) + "' holds %r more than once";
      return std::nullopt;
    }
    p.alternatives_.push_back(std::move(tokens));
  }
  return p;
}

bool Pattern::match_tokens(const Tokens& t, size_t ti, std::string_view s, size_t si, Match* m, size_t* step_at,
                           size_t* step_len) {
  if (ti == t.size()) return si == s.size();
  const Token& tok = t[ti];
  switch (tok.kind) {
    case Kind::literal:
      if (s.compare(si, tok.text.size(), tok.text) != 0) return false;
      return match_tokens(t, ti + 1, s, si + tok.text.size(), m, step_at, step_len);
    case Kind::star:
      for (size_t end = si;; ++end) {
        if (match_tokens(t, ti + 1, s, end, m, step_at, step_len)) return true;
        if (end == s.size() || s[end] == '/') return false;
      }
    case Kind::step:
    case Kind::rank: {
      size_t end = si;
      while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
      // Longest run first, then shorter ones (a literal digit may follow).
      for (size_t e = end; e > si; --e) {
        if (!match_tokens(t, ti + 1, s, e, m, step_at, step_len)) continue;
        if (tok.kind == Kind::step) {
          if (e - si > 18) return false;  // beyond uint64 safely: not a step
          uint64_t v = 0;
          for (size_t i = si; i < e; ++i) v = v * 10 + static_cast<uint64_t>(s[i] - '0');
          m->step = v;
          *step_at = si;
          *step_len = e - si;
        }
        return true;
      }
      return false;
    }
  }
  return false;
}

std::optional<Match> Pattern::match(std::string_view path) const {
  for (const auto& alt : alternatives_) {
    Match m;
    size_t at = 0, len = 0;
    if (match_tokens(alt, 0, path, 0, &m, &at, &len)) {
      m.slot = std::string(path.substr(0, at)) + "%d" + std::string(path.substr(at + len));
      return m;
    }
  }
  return std::nullopt;
}

}  // namespace cairn::interpose
