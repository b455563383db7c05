/* The C half of the Fortran binding (bindings/fortran/cairn.F90): what ISO_C_BINDING alone cannot do.
 *
 *  - Communicators: Fortran passes MPI handles as integers (`use mpi`, or type(MPI_Comm)'s MPI_VAL with
 *    `use mpi_f08`); MPI_Comm_f2c turns them into the MPI_Comm that cairn_init and cairn_redistribute take.
 *  - Arrays: cairn_protect takes any array (assumed rank, any type) as a C descriptor
 *    (ISO_Fortran_binding.h); this file reads its element type, element count and contiguity, and maps
 *    the type onto a cairn_type.
 *  - Errors of its own (a non-contiguous array, an element type a distribution cannot split): kept in a
 *    per-thread message that cairn_f_last_error() returns until the next call, since the library's
 *    cairn_last_error() only knows the library's calls.
 */
#include <ISO_Fortran_binding.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>

#include <mpi.h>

#include "cairn/cairn.h"

static _Thread_local char refusal[1024];
static _Thread_local int refused;

static int refuse(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(refusal, sizeof refusal, fmt, ap);
  va_end(ap);
  refused = 1;
  return code;
}

const char *cairn_f_last_error(void) { return refused ? refusal : cairn_last_error(); }

/* Called by the module after each call that did not go through this file. */
void cairn_f_forget_refusal(void) { refused = 0; }

int cairn_f_init(MPI_Fint comm, const char *config) {
  refused = 0;
  return cairn_init(MPI_Comm_f2c(comm), config[0] ? config : NULL);
}

int cairn_f_redistribute(MPI_Fint comm) {
  refused = 0;
  return cairn_redistribute(MPI_Comm_f2c(comm));
}

/* How an array's elements are stored for cairn. `splittable` is 0 when the cairn type covers several
 * Fortran elements or one element spans several cairn elements (character(len > 1), integer(2),
 * derived types): then only PRIVATE and REPLICATED regions can hold it, since the other distributions
 * count elements. */
typedef struct element_map {
  cairn_type type;
  size_t per_element; /* cairn elements per Fortran element */
  int splittable;
} element_map;

static element_map map_type(const CFI_cdesc_t *a) {
  const CFI_type_t t = a->type;
  element_map bytes = {CAIRN_BYTE, a->elem_len, a->elem_len == 1};
  if (t == CFI_type_int32_t) return (element_map){CAIRN_INT32, 1, 1};
  if (t == CFI_type_int64_t) return (element_map){CAIRN_INT64, 1, 1};
  if (t == CFI_type_float) return (element_map){CAIRN_FLOAT, 1, 1};
  if (t == CFI_type_double) return (element_map){CAIRN_DOUBLE, 1, 1};
  if (t == CFI_type_float_Complex) return (element_map){CAIRN_COMPLEX_FLOAT, 1, 1};
  if (t == CFI_type_double_Complex) return (element_map){CAIRN_COMPLEX_DOUBLE, 1, 1};
  if (t == CFI_type_char) return (element_map){CAIRN_CHAR, a->elem_len, a->elem_len == 1};
#ifdef CFI_type_Logical
  /* gfortran codes every logical kind as CFI_type_Logical + (kind << CFI_type_kind_shift); the
   * standard names only c_bool (CFI_type_Bool). Logicals of 4 and 8 bytes are stored as integers of
   * their size. */
  if (t == CFI_type_Logical + (4 << CFI_type_kind_shift)) return (element_map){CAIRN_INT32, 1, 1};
  if (t == CFI_type_Logical + (8 << CFI_type_kind_shift)) return (element_map){CAIRN_INT64, 1, 1};
#endif
  return bytes; /* integer(1), c_bool, integer(2), derived types, ...: their bytes */
}

/* cairn_protect (dist NULL) and cairn_protect_distributed for a Fortran array of any rank and type. */
int cairn_f_protect(const char *name, CFI_cdesc_t *a, const cairn_distribution *dist) {
  refused = 0;
  const char *call = dist ? "cairn_protect_distributed" : "cairn_protect";
  if (a->rank > 0 && !CFI_is_contiguous(a))
    return refuse(CAIRN_ERR_INVALID_ARG,
                  "%s('%s'): the array is not contiguous (a section with a stride, or a pointer to one); "
                  "cairn copies a region as one block of memory: protect a contiguous array",
                  call, name);
  size_t elements = 1;
  for (CFI_rank_t d = 0; d < a->rank; d++) elements *= (size_t)a->dim[d].extent;
  element_map m = map_type(a);
  size_t count = elements * m.per_element;
  if (!dist) return cairn_protect(name, a->base_addr, count, m.type);
  if (!m.splittable && dist->kind != CAIRN_DIST_PRIVATE && dist->kind != CAIRN_DIST_REPLICATED)
    return refuse(CAIRN_ERR_NOT_SUPPORTED,
                  "%s('%s'): elements of %zu bytes of this type have no cairn type, so a distribution that "
                  "splits the array by elements cannot count them; use integer(4/8), real(4/8), complex(4/8), "
                  "logical(4/8), integer(1) or character(len=1) arrays, or a PRIVATE or REPLICATED region",
                  call, name, (size_t)a->elem_len);
  return cairn_protect_distributed(name, a->base_addr, count, m.type, dist);
}
