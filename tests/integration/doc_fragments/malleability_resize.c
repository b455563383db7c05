/* docs/malleability.md's resize callback, at file scope as an application writes it. */
#include <stdlib.h>

#include <cairn/cairn.h>

struct state {
  double *a;
  size_t na;
};

#include DOC_FRAGMENT

cairn_resize_fn doc_fragment = resize_a; /* the callback has the type cairn_set_resize takes */
