// The per-process runtime: protected regions, versions, the progress engine (in progress).
#include "core/status.hpp"
