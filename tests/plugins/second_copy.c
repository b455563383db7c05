/* A test plugin for the agents' chain (include/cairn/agent_stage.h): it writes a second copy of every
 * version it sees under the directory named by its argument, in the L3 layout of a file per rank
 * (ARG/<version dir>/rank-<r>.data and rank-<r>.manifest), so that `cairn verify` can check the copy once
 * a COMMIT is put beside it. The data goes to a temporary name and is renamed in finish(); abort()
 * removes it. Used by tests/integration/service_test.py (case chain) and tests/unit/service. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cairn/agent_stage.h"

struct copy {
  int fd;
  char dir[4096], part[4200], data[4200], manifest[4200];
  const char* manifest_text;
  size_t manifest_len;
  uint64_t received, total;
};

static void say(char* err, size_t len, const char* what, const char* path) {
  snprintf(err, len, "%s %s: %s", what, path, strerror(errno));
}

static void* copy_begin(const struct cairn_stage_version* v, char* err, size_t err_len) {
  if (!v->arg[0] || v->arg[0] != '/') {
    snprintf(err, err_len, "second_copy needs an absolute directory as its argument");
    return NULL;
  }
  struct copy* c = calloc(1, sizeof *c);
  if (!c) return NULL;
  snprintf(c->dir, sizeof c->dir, "%s/%s", v->arg, v->version_dir);
  mkdir(v->arg, 0755);
  if (mkdir(c->dir, 0755) != 0 && errno != EEXIST) {
    say(err, err_len, "mkdir", c->dir);
    free(c);
    return NULL;
  }
  snprintf(c->data, sizeof c->data, "%s/rank-%u.data", c->dir, v->rank);
  snprintf(c->part, sizeof c->part, "%s.part-%d", c->data, (int)getpid());
  snprintf(c->manifest, sizeof c->manifest, "%s/rank-%u.manifest", c->dir, v->rank);
  c->fd = open(c->part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (c->fd < 0) {
    say(err, err_len, "open", c->part);
    free(c);
    return NULL;
  }
  c->manifest_text = v->manifest;
  c->manifest_len = v->manifest_len;
  c->total = v->total_size;
  return c;
}

static int copy_data(void* state, uint64_t offset, const void* bytes, size_t len, char* err, size_t err_len) {
  struct copy* c = state;
  const char* p = bytes;
  while (len > 0) {
    ssize_t n = pwrite(c->fd, p, len, (off_t)offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      say(err, err_len, "pwrite", c->part);
      return -1;
    }
    p += n, offset += (uint64_t)n, len -= (size_t)n, c->received += (uint64_t)n;
  }
  return 0;
}

static void copy_abort(void* state) {
  struct copy* c = state;
  close(c->fd);
  unlink(c->part);
  free(c);
}

static int copy_finish(void* state, char* err, size_t err_len) {
  struct copy* c = state;
  int rc = -1;
  if (c->received != c->total) {
    snprintf(err, err_len, "%llu of %llu bytes arrived", (unsigned long long)c->received, (unsigned long long)c->total);
  } else if (fsync(c->fd) != 0) {
    say(err, err_len, "fsync", c->part);
  } else if (rename(c->part, c->data) != 0) {
    say(err, err_len, "rename", c->part);
  } else {
    FILE* f = fopen(c->manifest, "wb");
    if (!f || fwrite(c->manifest_text, 1, c->manifest_len, f) != c->manifest_len || fclose(f) != 0)
      say(err, err_len, "write", c->manifest);
    else
      rc = 0;
  }
  if (rc != 0) {
    copy_abort(c);
    return rc;
  }
  close(c->fd);
  free(c);
  return 0;
}

static const struct cairn_agent_stage kStage = {CAIRN_AGENT_STAGE_ABI, "second_copy", copy_begin, copy_data,
                                                copy_finish, copy_abort};

CAIRN_AGENT_STAGE_EXPORT const struct cairn_agent_stage* cairn_agent_stage(void) { return &kStage; }
