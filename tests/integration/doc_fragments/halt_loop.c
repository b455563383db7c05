/* docs/halt.md's loop: the application's step and cairn's two collective questions. */
#include <cairn/cairn.h>

void compute_one_step(void);

void doc_fragment(void) {
#include DOC_FRAGMENT
}
