// The C library's own functions behind the ones the interposer replaces, found with dlsym(RTLD_NEXT)
// on first use. The interposer calls these for its own work, so it never re-enters itself.
#pragma once

#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

namespace cairn::interpose::real {

int open(const char* path, int flags, mode_t mode);
int openat(int dirfd, const char* path, int flags, mode_t mode);
int close(int fd);
FILE* fopen(const char* path, const char* mode);
FILE* freopen(const char* path, const char* mode, FILE* stream);
int fclose(FILE* stream);
int stat(const char* path, struct stat* st);
int fstatat(int dirfd, const char* path, struct stat* st, int flags);
int statx(int dirfd, const char* path, int flags, unsigned int mask, struct statx* st);
int access(const char* path, int mode);
int faccessat(int dirfd, const char* path, int mode, int flags);
int unlink(const char* path);
int unlinkat(int dirfd, const char* path, int flags);
int remove(const char* path);
int rename(const char* from, const char* to);
int renameat(int fromfd, const char* from, int tofd, const char* to);
int renameat2(int fromfd, const char* from, int tofd, const char* to, unsigned int flags);
int truncate(const char* path, off_t length);
DIR* opendir(const char* path);
struct dirent* readdir(DIR* dir);
struct dirent64* readdir64(DIR* dir);
int closedir(DIR* dir);
int dup(int fd);
int dup2(int fd, int fd2);
int dup3(int fd, int fd2, int flags);

}  // namespace cairn::interpose::real
