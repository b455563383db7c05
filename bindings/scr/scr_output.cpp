#include "scr_output.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "../common/lexical_path.hpp"

namespace cairn::scr {
namespace {

constexpr std::string_view kIndexHeader = "cairn-scr-output 1\n";
constexpr std::string_view kIndexEnd = "end\n";  // so a cut at a line end is seen

std::string sys_error(const char* call, const std::string& path) {
  return std::string(call) + "(" + path + "): " + strerror(errno);
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

std::string partial_path(const std::string& final_path, int rank) {
  return paths::dir_name(final_path) + "/." + paths::base_name(final_path) + ".cairn-partial." + std::to_string(rank);
}

std::string index_path(const std::string& prefix, const std::string& name) {
  static const char hex[] = "0123456789ABCDEF";
  std::string esc;
  for (size_t i = 0; i < name.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                 (c == '.' && i > 0);
    if (plain) {
      esc += static_cast<char>(c);
    } else {
      esc += '%';
      esc += hex[c >> 4];
      esc += hex[c & 15];
    }
  }
  return prefix + "/.scr/cairn-outputs/" + esc;
}

std::string encode_index(const std::vector<std::string>& files) {
  std::string out(kIndexHeader);
  for (const auto& f : files) out += std::to_string(f.size()) + ":" + f + "\n";
  out += kIndexEnd;
  return out;
}

std::optional<std::vector<std::string>> decode_index(std::string_view bytes) {
  if (bytes.substr(0, kIndexHeader.size()) != kIndexHeader) return std::nullopt;
  std::vector<std::string> files;
  size_t i = kIndexHeader.size();
  while (bytes.substr(i) != kIndexEnd) {
    size_t len = 0, digits = 0;
    if (i >= bytes.size() || bytes[i] == '0') return std::nullopt;  // lengths are > 0, without leading zeros
    while (i < bytes.size() && bytes[i] >= '0' && bytes[i] <= '9' && digits < 7) {
      len = len * 10 + static_cast<size_t>(bytes[i] - '0');
      ++i, ++digits;
    }
    if (digits == 0 || i >= bytes.size() || bytes[i] != ':') return std::nullopt;
    ++i;
    if (bytes.size() - i < len + 1 || bytes[i + len] != '\n') return std::nullopt;
    files.emplace_back(bytes.substr(i, len));
    if (files.back().find('\0') != std::string::npos) return std::nullopt;
    i += len + 1;
  }
  return files;
}

std::string copy_file(const std::string& src, const std::string& dst) {
  int in = open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return sys_error("open", src);
  int out = open(dst.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    std::string e = sys_error("open", dst);
    close(in);
    return e;
  }
  std::string err;
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t r = read(in, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      err = sys_error("read", src);
      break;
    }
    if (r == 0) break;
    if (!write_all(out, buf.data(), static_cast<size_t>(r))) {
      err = sys_error("write", dst);
      break;
    }
  }
  if (err.empty() && fsync(out) != 0) err = sys_error("fsync", dst);
  if (close(out) != 0 && err.empty()) err = sys_error("close", dst);
  close(in);
  return err;
}

std::string sync_file(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sys_error("open", path);
  std::string err = fsync(fd) == 0 ? "" : sys_error("fsync", path);
  close(fd);
  return err;
}

std::string make_dirs(const std::string& dir) {
  if (dir.empty() || dir == "/" || dir == ".") return "";
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? "" : dir + ": not a directory";
  std::string parent = make_dirs(paths::dir_name(dir));
  if (!parent.empty()) return parent;
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return sys_error("mkdir", dir);
  return "";
}

std::string write_file_atomic(const std::string& path, const std::string& bytes) {
  std::string err = make_dirs(paths::dir_name(path));
  if (!err.empty()) return err;
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return sys_error("open", tmp);
  if (!write_all(fd, bytes.data(), bytes.size())) err = sys_error("write", tmp);
  if (err.empty() && fsync(fd) != 0) err = sys_error("fsync", tmp);
  close(fd);
  if (err.empty() && rename(tmp.c_str(), path.c_str()) != 0) err = sys_error("rename", path);
  if (!err.empty()) unlink(tmp.c_str());
  return err;
}

std::vector<std::string> remove_files(const std::vector<std::string>& files, const std::string& stop_dir) {
  std::vector<std::string> errors;
  for (const auto& f : files) {
    if (unlink(f.c_str()) != 0 && errno != ENOENT) errors.push_back(sys_error("unlink", f));
    for (std::string d = paths::dir_name(f); paths::is_under(d, stop_dir) && d != stop_dir; d = paths::dir_name(d))
      if (rmdir(d.c_str()) != 0) break;  // not empty (or gone): stop climbing
  }
  return errors;
}

}  // namespace cairn::scr
