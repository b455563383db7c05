/* cairn's version, for code that needs it without MPI's headers (cairn.h includes this file). */
#ifndef CAIRN_VERSION_H
#define CAIRN_VERSION_H

#define CAIRN_VERSION_MAJOR 0
#define CAIRN_VERSION_MINOR 1
#define CAIRN_VERSION_PATCH 0

#endif
