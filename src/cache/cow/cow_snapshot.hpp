// The copy-on-write snapshotter (snapshot = cow; the contract is cache/snapshot.hpp's, the mechanism and
// its limits are in docs/architecture.md, "Snapshots").
//
// begin() write-protects each region's whole pages with userfaultfd and returns; a region's partial
// first and last pages (shared with memory that is not the region's), regions too small to be worth it
// and regions that cannot be write-protected are copied right there, on the blocking path. A background
// copier then copies the protected pages into the slot, in order, un-protecting each piece once copied.
// A write to a page not yet copied -- by any thread, or by the kernel on the process's behalf -- stops
// in the kernel; the fault handler thread copies the block around it (fault_block), un-protects it, and
// the writer goes on; the copier then carries on from there. Between two of its runs the copier serves
// a write that the handler thread has left waiting (the scheduler may keep that thread from a core
// until the copy is over). complete() waits for the copier and unregisters the memory.
//
// Exactness: a page is copied only while it is still write-protected, and every page the application
// can write was protected before begin() returned, so the slot holds the bytes of the call.
//
// Threads: begin() and complete() may be called from different threads, one at a time; the snapshotter
// has two threads of its own (copier, fault handler), with every signal blocked, that never allocate or
// lock anything the application could hold while a write of it waits. The destructor waits for a snapshot
// in flight and leaves nothing behind: no thread, no protection, no registration, no descriptor.
//
// Write tracking (CowOptions::track_writes): after a snapshot the protected ranges stay registered and
// write-protected; the first write to a block of them is noted per chunk of the stream (set_chunking) and
// un-protects the block (with huge pages, from the written page up; a second write, the rest of it), or
// the snapshotter's threads do so as soon as a snapshot has copied a block written in each of the two
// generations before it (CowOptions::unprotect_ahead), noting it written before any write: the
// application that writes the same part of its state between checkpoints then waits for no
// un-protection. The
// next begin() given set_previous(hashes, g) for a slot that holds snapshot g of this snapshotter
// protects again only the blocks written since the last snapshot, and copies only the chunks written
// since snapshot g, and of those only their pages in blocks written since (a chunk that straddles a
// block not written keeps that part from the slot); the rest is left in the slot as it is
// (SnapshotReport::chunk_changed). A region forgotten (forget()), unmapped, discarded or moved, another
// layout of the regions or of the stream, or a failed snapshot ends the tracking: the next snapshot
// copies everything.
//
// A region unmapped, madvise(MADV_DONTNEED)'d or moved by mremap while its snapshot is in flight makes
// complete() fail with ERR_SEQUENCE naming it (the version is then discarded, never wrong); the copier
// reads with process_vm_readv, so such a region is a failed snapshot, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.hpp"
#include "cache/snapshot.hpp"

namespace cairn {

struct CowOptions {
  uint64_t copy_chunk = 2 << 20;   // the copier's step; a transparent huge page stays whole
  uint64_t fault_block = 2 << 20;  // what a write to a page not yet copied has copied first, around it
  uint64_t eager_below = 64 << 10;  // regions with less protectable memory are copied in begin()
  // Between snapshots, gather the protected memory into transparent huge pages (MADV_COLLAPSE) so the
  // next protection walks 512 times fewer page-table entries; never where THP is "never".
  bool huge_pages = true;
  // Keep the ranges protected between snapshots and note which chunks were written (above).
  bool track_writes = true;
  // Tracking writes: a block noted written in each of the two generations before a snapshot is
  // un-protected as soon as it is copied (by the copier, or by the fault handler for the block above a
  // writer it served), and noted written, instead of when the application's next write to it waits for
  // the fault handler -- for at most this many snapshots in a row, after which its writes are seen
  // again (a block the application has left then stops being copied). 0: never.
  uint32_t unprotect_ahead = 8;
};

// Empty when this process can take copy-on-write snapshots, else why not (no userfaultfd, not
// permitted, a kernel without write-protect of unpopulated memory, process_vm_readv refused).
std::string cow_unsupported_reason();

// ERR_NOT_SUPPORTED (with cow_unsupported_reason's text) where the kernel or the permissions forbid it.
// copy_chunk and fault_block are powers of two of at least a page (ERR_INVALID_ARG otherwise).
Result<std::unique_ptr<Snapshotter>> make_cow_snapshotter(const CowOptions& options = {});

}  // namespace cairn
