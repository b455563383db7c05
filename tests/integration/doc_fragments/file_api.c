/* docs/examples.md's file-API pattern: one output version, then a restart from one. */
#include <cairn/cairn.h>

void doc_fragment(int ok, int data_was_good) {
  char path[4096], label[256];
  int available = 0;
#include DOC_FRAGMENT
}
