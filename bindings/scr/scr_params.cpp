// SCR's parameters: the parser of SCR_Config strings and SCR config files, and the mapping of every
// source onto cairn's knobs by the one table of what each parameter becomes (scr_param_table.cpp; see
// scr_params.hpp; docs/scr.md shows the table).
#include "scr_params.hpp"

#include <cctype>
#include <set>

#include "scr_param_table.hpp"

namespace cairn::scr {
namespace {

bool is_key(std::string_view k) {
  if (k.empty()) return false;
  for (char c : k)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// One word of a setting: KEY, KEY= or KEY=VALUE (VALUE may be "quoted").
struct Word {
  std::string key, value;
  bool has_eq = false;
};

// Splits on spaces and tabs, honouring "..." in values. false with *error on an unclosed quote.
bool split_words(std::string_view text, std::vector<Word>* out, std::string* error) {
  size_t i = 0, n = text.size();
  while (i < n) {
    while (i < n && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (i == n) break;
    Word w;
    while (i < n && text[i] != '=' && text[i] != ' ' && text[i] != '\t') w.key += text[i++];
    // SCR also accepts spaces around '=' ("KEY = VALUE").
    size_t j = i;
    while (j < n && (text[j] == ' ' || text[j] == '\t')) ++j;
    if (j < n && text[j] == '=') {
      i = j + 1;
      w.has_eq = true;
      while (i < n && (text[i] == ' ' || text[i] == '\t')) ++i;
      if (i < n && text[i] == '"') {
        size_t close = text.find('"', i + 1);
        if (close == std::string_view::npos) {
          *error = "unclosed quote in '" + std::string(text) + "'";
          return false;
        }
        w.value = std::string(text.substr(i + 1, close - i - 1));
        i = close + 1;
      } else {
        while (i < n && text[i] != ' ' && text[i] != '\t') w.value += text[i++];
      }
    }
    out->push_back(std::move(w));
  }
  return true;
}

std::optional<Setting> setting_from_words(const std::vector<Word>& words, std::string* error) {
  if (words.empty()) {
    *error = "empty setting";
    return std::nullopt;
  }
  Setting s;
  for (size_t i = 0; i < words.size(); ++i) {
    const Word& w = words[i];
    if (!is_key(w.key)) {
      *error = "'" + w.key + "' is not a parameter name (letters, digits and _)";
      return std::nullopt;
    }
    if (!w.has_eq || w.value.empty()) {
      *error = "'" + w.key + "' has no value (write " + w.key + "=VALUE)";
      return std::nullopt;
    }
    if (i == 0) s.key = w.key, s.value = w.value;
    else s.children.emplace_back(w.key, w.value);
  }
  return s;
}

bool is_descriptor(const std::string& key) { return key == "CKPT" || key == "STORE" || key == "GROUPS"; }

// The CKPT descriptor cairn follows: the one with INTERVAL=1 (or no INTERVAL), lowest index first.
void apply_descriptors(const Sources& s, bool copy_type_set, Mapping& m) {
  std::map<std::string, std::map<std::string, std::string>> ckpt;  // index -> key -> value (later wins)
  std::set<std::string> stores;
  bool groups = false;
  auto take = [&](const std::vector<Setting>& list) {
    for (const auto& st : list) {
      if (st.key == "CKPT")
        for (const auto& [k, v] : st.children) ckpt[st.value][k] = v;
      else if (st.key == "STORE")
        stores.insert(st.value);
      else if (st.key == "GROUPS")
        groups = true;
    }
  };
  take(s.app);
  take(s.user_file);  // the user file is above SCR_Config: its values win
  if (!stores.empty())
    m.warnings.push_back("STORE descriptors are not used: cairn caches in one directory per node (SCR_CACHE_BASE, "
                         "CAIRN_CACHE_DIR)");
  if (groups) m.warnings.push_back("GROUPS descriptors are not used: cairn's failure group is the node (CAIRN_NODE)");
  if (ckpt.empty()) return;
  if (copy_type_set) {
    m.warnings.push_back("CKPT descriptors are ignored: SCR_COPY_TYPE is set (SCR_COPY_TYPE=FILE uses them)");
    return;
  }
  std::string chosen;
  for (const auto& [index, keys] : ckpt) {
    auto it = keys.find("INTERVAL");
    if (it == keys.end() || it->second == "1") {
      chosen = index;
      break;
    }
  }
  if (chosen.empty()) {
    m.warnings.push_back("no CKPT descriptor has INTERVAL=1; CKPT descriptors are ignored");
    return;
  }
  if (ckpt.size() > 1)
    m.warnings.push_back("cairn applies one redundancy scheme to every checkpoint: using CKPT=" + chosen +
                         " (INTERVAL=1), ignoring the other CKPT descriptors");
  const std::string from = "CKPT=" + chosen;
  for (const auto& [k, v] : ckpt[chosen]) {
    if (k == "TYPE") {
      auto r = table::copy_type(v);
      if (!r) table::refuse(&m, from + " TYPE", v, "SINGLE, PARTNER, XOR or RS");
      else table::set_knob(&m, "CAIRN_REDUNDANCY", *r, from + " TYPE");
    } else if (k == "SET_SIZE") {  // as SCR_SET_SIZE, SCR_SET_FAILURES, SCR_CACHE_BASE: the same rows
      table::apply(*table::find("SCR_SET_SIZE"), from + " SET_SIZE", v, &m);
    } else if (k == "SET_FAILURES") {
      table::apply(*table::find("SCR_SET_FAILURES"), from + " SET_FAILURES", v, &m);
    } else if (k == "STORE") {
      table::apply(*table::find("SCR_CACHE_BASE"), from + " STORE", v, &m);
    } else if (k != "INTERVAL") {
      m.notes.push_back(from + " " + k + "=" + v + ": not used by cairn");
    }
  }
}

// The effective value of a simple parameter: environment, user file, SCR_Config (later calls win).
std::optional<std::pair<std::string, std::string>> effective(const Sources& s, const std::string& key) {
  if (key.rfind("SCR_", 0) == 0 && s.env)
    if (const char* v = s.env(key.c_str()); v && *v) return std::make_pair(std::string(v), std::string("environment"));
  for (auto it = s.user_file.rbegin(); it != s.user_file.rend(); ++it)
    if (it->key == key && it->children.empty()) return std::make_pair(it->value, std::string("config file"));
  for (auto it = s.app.rbegin(); it != s.app.rend(); ++it)
    if (it->key == key && it->children.empty()) return std::make_pair(it->value, std::string("SCR_Config"));
  return std::nullopt;
}

}  // namespace

std::optional<ConfigRequest> parse_config_request(std::string_view text, std::string* error) {
  std::vector<Word> words;
  if (!split_words(text, &words, error)) return std::nullopt;
  if (words.empty()) {
    *error = "empty configuration string";
    return std::nullopt;
  }
  ConfigRequest r;
  const Word& first = words[0];
  if (!is_key(first.key)) {
    *error = "'" + first.key + "' is not a parameter name (letters, digits and _)";
    return std::nullopt;
  }
  if (!first.has_eq) {
    if (words.size() > 1) {
      *error = "a query names one parameter: '" + std::string(text) + "'";
      return std::nullopt;
    }
    r.op = ConfigRequest::Op::query;
    r.setting.key = first.key;
    return r;
  }
  if (first.value.empty()) {
    if (words.size() > 1) {
      *error = "'" + first.key + "=' unsets a parameter and takes nothing after it";
      return std::nullopt;
    }
    r.op = ConfigRequest::Op::unset;
    r.setting.key = first.key;
    return r;
  }
  if (words.size() == 2 && !words[1].has_eq) {  // "CKPT=0 TYPE": query a descriptor's child
    if (!is_key(words[1].key)) {
      *error = "'" + words[1].key + "' is not a parameter name";
      return std::nullopt;
    }
    r.op = ConfigRequest::Op::query;
    r.setting.key = first.key;
    r.setting.value = first.value;
    r.query_child = words[1].key;
    return r;
  }
  auto s = setting_from_words(words, error);
  if (!s) return std::nullopt;
  r.op = ConfigRequest::Op::set;
  r.setting = std::move(*s);
  return r;
}

std::string expand_env(std::string_view value, const EnvLookup& env) {
  std::string out;
  for (size_t i = 0; i < value.size();) {
    if (value[i] != '$' || i + 1 >= value.size()) {
      out += value[i++];
      continue;
    }
    bool braced = value[i + 1] == '{';
    size_t b = i + (braced ? 2 : 1), e = b;
    while (e < value.size() && (std::isalnum(static_cast<unsigned char>(value[e])) || value[e] == '_')) ++e;
    if (e == b || (braced && (e >= value.size() || value[e] != '}'))) {
      out += value[i++];  // not a variable: keep the '$'
      continue;
    }
    std::string name(value.substr(b, e - b));
    const char* v = env ? env(name.c_str()) : nullptr;
    if (v) out += v;
    i = braced ? e + 1 : e;
  }
  return out;
}

std::vector<Setting> parse_config_file(std::string_view text, const EnvLookup& env, std::vector<std::string>* errors) {
  std::vector<Setting> out;
  size_t line_no = 0, pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    // '#' starts a comment unless it is inside quotes.
    bool quoted = false;
    size_t cut = line.size();
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '"') quoted = !quoted;
      if (line[i] == '#' && !quoted) {
        cut = i;
        break;
      }
    }
    line = line.substr(0, cut);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
    if (line.empty()) continue;
    std::vector<Word> words;
    std::string error;
    std::optional<Setting> s;
    if (split_words(line, &words, &error)) s = setting_from_words(words, &error);
    if (!s) {
      if (errors) errors->push_back(std::to_string(line_no) + ": " + error);
      continue;
    }
    s->value = expand_env(s->value, env);
    for (auto& [k, v] : s->children) v = expand_env(v, env);
    out.push_back(std::move(*s));
  }
  return out;
}

std::optional<std::string> lookup(const Sources& s, const std::string& key, const std::string& parent_value,
                                  const std::string& child) {
  if (child.empty()) {
    auto e = effective(s, key);
    if (e) return e->first;
    return std::nullopt;
  }
  for (const auto* list : {&s.user_file, &s.app})
    for (auto it = list->rbegin(); it != list->rend(); ++it)
      if (it->key == key && it->value == parent_value)
        for (auto c = it->children.rbegin(); c != it->children.rend(); ++c)
          if (c->first == child) return c->second;
  return std::nullopt;
}

Mapping map_parameters(const Sources& s) {
  Mapping m;
  std::set<std::string> keys;
  for (const auto& n : s.env_scr_names) keys.insert(n);
  for (const auto* list : {&s.user_file, &s.app})
    for (const auto& st : *list)
      if (st.children.empty() && !is_descriptor(st.key)) keys.insert(st.key);
  bool copy_type_set = false;
  for (const auto& key : keys) {
    auto e = effective(s, key);
    if (!e) continue;
    const table::Row* p = table::find(key);
    if (!p) {
      m.warnings.push_back("unknown SCR parameter " + key + "=" + e->first + " (" + e->second + "): ignored");
      continue;
    }
    if (key == "SCR_COPY_TYPE" && table::upper(e->first) != "FILE") copy_type_set = true;
    table::apply(*p, key, e->first, &m);
  }
  apply_descriptors(s, copy_type_set, m);
  // A CAIRN_* variable the user set is above anything SCR's parameters say.
  for (auto it = m.cairn_env.begin(); it != m.cairn_env.end();) {
    const char* mine = s.env ? s.env(it->first.c_str()) : nullptr;
    if (mine && *mine) {
      if (it->second != mine)
        m.warnings.push_back(it->first + "=" + mine + " (environment) is used, not " + m.origin[it->first] + "'s " +
                             it->second);
      m.origin.erase(it->first);
      it = m.cairn_env.erase(it);
    } else {
      ++it;
    }
  }
  return m;
}

const std::vector<ParameterInfo>& parameter_table() {
  static const std::vector<ParameterInfo> info = [] {
    std::vector<ParameterInfo> t;
    for (const auto& r : table::rows())
      t.push_back({r.scr, table::becomes(r), r.meaning, r.knob ? r.knob : "", r.lo, r.hi});
    t.push_back({"CKPT descriptor", "redundancy, set_size, rs_parity, cache_dir",
                 "the descriptor with INTERVAL=1: TYPE, SET_SIZE, SET_FAILURES, STORE; cairn applies one scheme to "
                 "every checkpoint, so other descriptors are ignored with a warning"});
    t.push_back({"STORE, GROUPS descriptors", "nothing", "ignored with a warning"});
    return t;
  }();
  return info;
}

}  // namespace cairn::scr
