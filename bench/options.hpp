// cairn-bench's options common to every mode. Each mode's options type derives from CommonOptions and
// sets the mode's defaults in its constructor; main.cpp, the one command line, fills them.
#pragma once

#include <cstdint>
#include <string>

namespace cairn::bench {

// What every mode reads from the one command line (main.cpp), each mode's options type adding its own:
// Options (the levels and their modes, here), FileModeOptions, ServiceOptions, MigrateBenchOptions,
// CampaignOptions, DeviceOptions, IncrementalOptions. main.cpp fills these with the mode's defaults (fill_common), which
// `cairn-bench --help` names.
struct CommonOptions {
  int ranks = 2;
  std::string size_text;  // --size as given (one size, or a list where the mode takes one)
  uint64_t size = 0;      // the (first) size in bytes, once parsed
  int reps = 5;           // timed repetitions, the median reported
  std::string prefix_base = "/tmp";    // a fresh work directory is made there (holding the L3 prefix)
  std::string cache_dir = "/dev/shm";  // the base of the L1 cache
  bool json = false;
  bool verbose = false;
};

}  // namespace cairn::bench
