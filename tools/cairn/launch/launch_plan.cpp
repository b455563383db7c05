#include "launch/launch_plan.hpp"

#include <algorithm>

#include "base/fsutil.hpp"

namespace cairn::tool {

std::string node_name(int node) { return "node" + std::to_string(node); }

std::vector<int> ranks_per_node(int nranks, int nnodes) {
  std::vector<int> counts(static_cast<size_t>(nnodes), 0);
  for (int r = 0; r < nranks; ++r)
    ++counts[static_cast<size_t>(static_cast<long long>(r) * nnodes / nranks)];
  return counts;
}

std::vector<int> ranks_of_node(const std::vector<int>& counts, int node) {
  int first = 0;
  for (int i = 0; i < node; ++i) first += counts[static_cast<size_t>(i)];
  std::vector<int> ranks;
  for (int k = 0; k < counts[static_cast<size_t>(node)]; ++k) ranks.push_back(first + k);
  return ranks;
}

const char* launcher_name(LauncherKind kind) { return kind == LauncherKind::srun ? "srun" : "mpirun"; }

int total_ranks(const LaunchSpec& spec) {
  int n = 0;
  for (int c : spec.ranks_per_node) n += c;
  return n;
}

namespace {

// The app contexts of one entry of ranks_per_node: (rank count, node name), one for the whole entry, or
// one per rank when the entry's ranks are spread over other nodes.
std::vector<std::pair<int, std::string>> contexts_of(const LaunchSpec& spec, size_t node) {
  const int count = spec.ranks_per_node[node];
  if (count == 0) return {};  // a node lost without a spare
  if (node < spec.spread.size() && !spec.spread[node].empty()) {
    std::vector<std::pair<int, std::string>> out;
    for (int k = 0; k < count; ++k) out.emplace_back(1, spec.spread[node][static_cast<size_t>(k) % spec.spread[node].size()]);
    return out;
  }
  return {{count, node < spec.node_names.size() ? spec.node_names[node] : node_name(static_cast<int>(node))}};
}

// The words every rank of `node` runs on node `name`: env CAIRN_NODE=<name> [job_env] [inject_env] CMD ARGS.
std::vector<std::string> node_words(const LaunchSpec& spec, size_t node, const std::string& name, bool with_injection) {
  std::vector<std::string> words{"env"};
  if (!spec.real_hosts) words.push_back("CAIRN_NODE=" + name);  // on real hosts the library names the host itself
  for (const auto& [name, value] : spec.job_env) words.push_back(name + "=" + value);
  bool killed = std::find(spec.inject_nodes.begin(), spec.inject_nodes.end(), static_cast<int>(node)) !=
                spec.inject_nodes.end();
  if (with_injection && killed)
    for (const auto& [name, value] : spec.inject_env) words.push_back(name + "=" + value);
  words.insert(words.end(), spec.command.begin(), spec.command.end());
  return words;
}

// True when one of `words` is the option `name` ("--mpi") alone or as "--mpi=..."; `short_name`
// ("-K") also matches "-K..." (an attached value).
bool has_option(const std::vector<std::string>& words, const std::string& name, const std::string& short_name = "") {
  for (const auto& w : words) {
    if (w == name || w.rfind(name + "=", 0) == 0) return true;
    if (!short_name.empty() && w.rfind(short_name, 0) == 0) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> mpirun_argv(const LaunchSpec& spec, bool with_injection) {
  std::vector<std::string> argv{spec.mpirun};
  argv.insert(argv.end(), spec.mpirun_args.begin(), spec.mpirun_args.end());
  bool first = true;
  for (size_t node = 0; node < spec.ranks_per_node.size(); ++node) {
    for (const auto& [count, name] : contexts_of(spec, node)) {
      if (!first) argv.push_back(":");
      first = false;
      argv.insert(argv.end(), {"-np", std::to_string(count)});
      if (spec.real_hosts) argv.insert(argv.end(), {"--host", name + ":" + std::to_string(count)});
      auto words = node_words(spec, node, name, with_injection);
      argv.insert(argv.end(), words.begin(), words.end());
    }
  }
  return argv;
}

EnvAssignments mpirun_env(const LaunchSpec& spec, const char* user_setting) {
  if (spec.launcher != LauncherKind::mpirun || (user_setting && *user_setting)) return {};
  for (const auto& w : spec.mpirun_args)
    if (w.find("odls_base_sigkill_timeout") != std::string::npos) return {};
  return {{"OMPI_MCA_odls_base_sigkill_timeout", "0"}};
}

std::vector<std::string> srun_options(const std::vector<std::string>& user_words) {
  std::vector<std::string> words;
  if (!has_option(user_words, "--mpi")) words.push_back("--mpi=pmix");
  if (!has_option(user_words, "--kill-on-bad-exit", "-K")) words.push_back("--kill-on-bad-exit=1");
  if (!has_option(user_words, "--quit-on-interrupt") &&
      std::find(user_words.begin(), user_words.end(), "-q") == user_words.end())
    words.push_back("--quit-on-interrupt");
  words.insert(words.end(), user_words.begin(), user_words.end());
  return words;
}

std::vector<std::string> srun_argv(const LaunchSpec& spec) {
  std::vector<std::string> argv{spec.srun};
  argv.insert(argv.end(), spec.srun_args.begin(), spec.srun_args.end());
  argv.insert(argv.end(), {"-n", std::to_string(total_ranks(spec))});
  if (spec.real_hosts) {
    argv.insert(argv.end(), {"-m", "arbitrary", "-w", spec.host_file});
    if (!spec.exclude.empty()) {
      std::string list;
      for (const auto& h : spec.exclude) list += (list.empty() ? "" : ",") + h;
      argv.insert(argv.end(), {"-x", list});
    }
  }
  argv.insert(argv.end(), {"--multi-prog", spec.multi_prog_file});
  return argv;
}

std::string host_file_text(const LaunchSpec& spec) {
  std::string text;
  for (size_t node = 0; node < spec.ranks_per_node.size(); ++node)
    for (const auto& [count, name] : contexts_of(spec, node))
      for (int k = 0; k < count; ++k) text += name + "\n";
  return text;
}

std::string multi_prog_quote(const std::string& word) {
  bool plain = !word.empty();
  for (char c : word) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("_-+=.,:/@").find(c) != std::string_view::npos;
    if (!ok) plain = false;
  }
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Result<std::string> multi_prog_text(const LaunchSpec& spec, bool with_injection) {
  std::string text = "# srun --multi-prog file written by `cairn run` for this attempt: ranks, then the words.\n";
  int first = 0;
  for (size_t node = 0; node < spec.ranks_per_node.size(); ++node)
  for (const auto& [count, name] : contexts_of(spec, node)) {
    std::string line = std::to_string(first);
    if (count > 1) line += "-" + std::to_string(first + count - 1);
    for (const auto& word : node_words(spec, node, name, with_injection)) {
      if (word.find('\n') != std::string::npos || word.find('\r') != std::string::npos)
        return make_error(Code::ERR_INVALID_ARG,
                          "cannot pass the word '%s' to srun: srun's --multi-prog file has one line per "
                          "program, so a word may not contain a line break (use --launcher mpirun)",
                          word.c_str());
      line += " " + multi_prog_quote(word);
    }
    text += line + "\n";
    first += count;
  }
  return text;
}

Result<std::vector<std::string>> launch_argv(const LaunchSpec& spec, bool with_injection) {
  if (spec.launcher == LauncherKind::mpirun) return mpirun_argv(spec, with_injection);
  auto text = multi_prog_text(spec, with_injection);
  if (!text) return text.status();
  CAIRN_TRY(fs::make_dirs(fs::dirname(spec.multi_prog_file)).prefixed("srun --multi-prog file"));
  CAIRN_TRY(fs::write_file_atomic(spec.multi_prog_file, *text, /*sync=*/false).prefixed("srun --multi-prog file"));
  if (spec.real_hosts)
    CAIRN_TRY(fs::write_file_atomic(spec.host_file, host_file_text(spec), /*sync=*/false).prefixed("srun host file"));
  return srun_argv(spec);
}

Result<LauncherChoice> choose_launcher(const std::string& requested, const std::string& requested_from,
                                       const std::string& slurm_job_id, const std::string& srun_path,
                                       const std::string& srun_hint) {
  const std::string what = requested_from + requested;  // "--launcher srun", "CAIRN_LAUNCHER=srun", "auto"
  LauncherChoice choice;
  if (requested == "mpirun") {
    choice.reason = what;
    return choice;
  }
  if (requested == "srun") {
    if (slurm_job_id.empty())
      return make_error(Code::ERR_INVALID_ARG,
                        "%s: not inside a Slurm allocation (SLURM_JOB_ID is not set); run `cairn run` under "
                        "salloc or in an sbatch script, or use --launcher mpirun",
                        what.c_str());
    if (srun_path.empty())
      return make_error(Code::ERR_INVALID_ARG, "%s: srun not found (%s)", what.c_str(), srun_hint.c_str());
    choice.kind = LauncherKind::srun;
    choice.reason = what + ", in Slurm allocation " + slurm_job_id;
    return choice;
  }
  if (requested != "auto")
    return make_error(Code::ERR_INVALID_ARG, "%s: unknown launcher; use auto, mpirun or srun", what.c_str());
  if (slurm_job_id.empty()) {
    choice.reason = what + ": not inside a Slurm allocation (SLURM_JOB_ID is not set)";
  } else if (srun_path.empty()) {
    choice.reason = what + ": inside Slurm allocation " + slurm_job_id + ", but srun was not found (" + srun_hint + ")";
  } else {
    choice.kind = LauncherKind::srun;
    choice.reason = what + ": inside Slurm allocation " + slurm_job_id;
  }
  return choice;
}

}  // namespace cairn::tool
