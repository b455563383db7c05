#include "base/history_line.hpp"

#include <cmath>

namespace cairn::history {

// ---- encoding --------------------------------------------------------------------------------------

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not one.
size_t utf8_length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  if (n > 1) {
    unsigned char c1 = b(i + 1);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
      return 0;
  }
  return n;
}

}  // namespace

std::string to_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (size_t n = utf8_length(text, i)) {
      out.append(text.substr(i, n));
      i += n;
    } else {  // U+0080..U+00FF in two bytes
      unsigned char c = static_cast<unsigned char>(text[i++]);
      out.push_back(static_cast<char>(0xC0 | c >> 6));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

LineWriter::LineWriter(std::string_view event) : line_(nlohmann::ordered_json::object()) {
  line_["v"] = kFormat;
  line_["ev"] = to_utf8(event);
}

LineWriter& LineWriter::str(std::string_view key, std::string_view value) {
  line_[to_utf8(key)] = to_utf8(value);
  return *this;
}

LineWriter& LineWriter::i64(std::string_view key, int64_t value) {
  line_[to_utf8(key)] = value;
  return *this;
}

LineWriter& LineWriter::u64(std::string_view key, uint64_t value) {
  line_[to_utf8(key)] = value;
  return *this;
}

LineWriter& LineWriter::real(std::string_view key, double value) {
  if (std::isfinite(value))
    line_[to_utf8(key)] = value;
  else
    line_[to_utf8(key)] = nullptr;
  return *this;
}

LineWriter& LineWriter::boolean(std::string_view key, bool value) {
  line_[to_utf8(key)] = value;
  return *this;
}

LineWriter& LineWriter::strings(std::string_view key, const std::vector<std::string>& values) {
  auto list = nlohmann::ordered_json::array();
  for (const auto& v : values) list.push_back(to_utf8(v));
  line_[to_utf8(key)] = std::move(list);
  return *this;
}

// Every string went through to_utf8, so dump() cannot meet invalid UTF-8 (its only reason to throw).
std::string LineWriter::finish() const { return line_.dump() + "\n"; }

// ---- decoding --------------------------------------------------------------------------------------

namespace {

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 17: <what>" -> "<what>".
std::string what_of(const nlohmann::json::exception& e) {
  std::string w = e.what();
  size_t column = w.find("column ");
  size_t colon = w.find(": ", column == std::string::npos ? 0 : column);
  if (colon != std::string::npos) return w.substr(colon + 2);
  size_t bracket = w.find("] ");
  return bracket == std::string::npos ? w : w.substr(bracket + 2);
}

bool is_format_number(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() >= 1;
  return v.is_number_integer() && v.get<int64_t>() >= 1;
}

}  // namespace

Result<nlohmann::json> decode_line(std::string_view text) {
  nlohmann::json line;
  try {
    line = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return make_error(Code::ERR_FORMAT, "not a history line: %s at byte %zu", what_of(e).c_str(),
                      e.byte > 0 ? e.byte - 1 : 0);
  } catch (const nlohmann::json::exception& e) {  // a number beyond a double
    return make_error(Code::ERR_FORMAT, "not a history line: %s", what_of(e).c_str());
  }
  if (!line.is_object()) return make_error(Code::ERR_FORMAT, "not a history line: not a JSON object");
  auto v = line.find("v");
  if (v == line.end() || !is_format_number(*v))
    return make_error(Code::ERR_FORMAT, "not a history line: no format field \"v\"");
  return line;
}

}  // namespace cairn::history
