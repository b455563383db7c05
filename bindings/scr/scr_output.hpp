// The files of SCR output datasets (SCR_FLAG_OUTPUT): they are written beside their final place in the
// prefix under a partial name and renamed into place once every rank's output is valid, so a reader
// never sees a half-written output. An index per dataset (in <prefix>/.scr/cairn-outputs/) lists the
// files, so SCR_Delete can remove them in a later run. No MPI here; scr_api.cpp calls these.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::scr {

// Where rank `rank` writes `final_path` until the dataset completes: ".<name>.cairn-partial.<rank>"
// in the same directory (so the rename stays on one file system).
std::string partial_path(const std::string& final_path, int rank);

// The index file of dataset `name` under `prefix` (the name escaped into one file-name component).
std::string index_path(const std::string& prefix, const std::string& name);

// The index's bytes: a header line, "<length>:<path>\n" per file, then "end\n". decode returns nullopt
// for anything that is not exactly that.
std::string encode_index(const std::vector<std::string>& files);
std::optional<std::vector<std::string>> decode_index(std::string_view bytes);

// Copy src to dst (created or truncated) and fsync it; "" or a message naming the call and path.
std::string copy_file(const std::string& src, const std::string& dst);
// fsync an existing file; "" or a message.
std::string sync_file(const std::string& path);
// Write `bytes` to `path` through a temporary file and a rename; "" or a message. Creates parents.
std::string write_file_atomic(const std::string& path, const std::string& bytes);
// mkdir -p; "" or a message.
std::string make_dirs(const std::string& dir);
// Remove each file, then every directory left empty between it and `stop_dir` (exclusive), as SCR
// does; messages for files that could not be removed (a missing file is not an error).
std::vector<std::string> remove_files(const std::vector<std::string>& files, const std::string& stop_dir);

}  // namespace cairn::scr
