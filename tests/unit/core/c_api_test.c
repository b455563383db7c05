/* Compiled as plain C99 against the public header: the header is C-clean and the error surface works
 * without MPI being initialized. */
#include <stdio.h>
#include <string.h>

#include "cairn/cairn.h"
#include "cairn/cairn_device.h"

int main(void) {
  int failures = 0;
  if (strcmp(cairn_strerror(CAIRN_SUCCESS), "success") != 0) failures++;
  if (strlen(cairn_strerror(CAIRN_ERR_IO)) == 0) failures++;
  if (strlen(cairn_strerror(-12345)) == 0) failures++;
  /* Misuse is an error, never an abort. */
  if (cairn_checkpoint() != CAIRN_ERR_NOT_INITIALIZED) failures++;
  if (strstr(cairn_last_error(), "cairn_init") == NULL) failures++;
  if (cairn_protect(NULL, NULL, 0, CAIRN_BYTE) != CAIRN_ERR_NOT_INITIALIZED) failures++;
  {
    void *event = NULL;
    if (cairn_device_stream(NULL) != CAIRN_ERR_NOT_INITIALIZED) failures++;
    if (cairn_device_wait_copied(NULL) != CAIRN_ERR_NOT_INITIALIZED) failures++;
    if (cairn_device_copied_event(&event) != CAIRN_ERR_NOT_INITIALIZED) failures++;
  }
  printf("c_api_test: %d failures\n", failures);
  return failures ? 1 : 0;
}
