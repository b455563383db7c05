// Damage for tests that check that a checksum catches it: one byte flipped in a file.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/fsutil.hpp"
#include "l3/l3_store.hpp"

namespace cairn::test {

// Flip the bits `mask` of the byte at `at` of the file at `path`.
inline void flip_byte(const std::string& path, uint64_t at, uint8_t mask) {
  auto fd = fs::open_file(path, O_RDWR);
  ASSERT_TRUE(fd.is_ok()) << fd.status().message();
  uint8_t b = 0;
  ASSERT_EQ(pread(fd->get(), &b, 1, static_cast<off_t>(at)), 1) << path;
  b ^= mask;
  ASSERT_EQ(pwrite(fd->get(), &b, 1, static_cast<off_t>(at)), 1) << path;
}

// Damage rank `rank`'s stored bytes of L3 version v wherever they lie: 100 bytes into its own data
// file, or, where a where-record places them in a shared file, 100 bytes (at most half the stored
// length) into its piece there.
inline void damage_l3_data(const Layout& l, uint64_t v, uint32_t rank) {
  std::string file = l3::data_path(l, v, rank);
  uint64_t at = 100;
  std::string wpath = l3::where_path(l, v, rank);
  if (fs::exists(wpath)) {
    auto w = l3::decode_where(*fs::read_file(wpath));
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    file = w->file;
    at = w->offset + std::min<uint64_t>(100, w->stored / 2);
  }
  flip_byte(file, at, 0x5a);
}

}  // namespace cairn::test
