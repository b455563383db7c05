// xxHash, as every checksum of the library, the tools and the bench computes it. Where the installed
// libxxhash has its x86 dispatcher (CAIRN_HAVE_XXH_DISPATCH, found at configure time), the XXH3 entry
// points are routed through it: it picks AVX-512, AVX2 or SSE2 at run time, where the plain entry
// points of a distribution's generic build are SSE2 only, several times slower on a machine with AVX-512
// (docs/performance.md). The hashes are the same either way.
#pragma once

#include <xxhash.h>
#if defined(CAIRN_HAVE_XXH_DISPATCH)
#include <xxh_x86dispatch.h>
#endif
