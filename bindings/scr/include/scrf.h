! scrf.h: SCR's Fortran constants, implemented by cairn.
! Include it with INCLUDE 'scrf.h' (fixed or free form). The
! subroutines SCR_INIT(IERROR), SCR_ROUTE_FILE(NAME, FILE, IERROR),
! ... take SCR's arguments; docs/scr.md lists them.
!
! return codes
      INTEGER SCR_SUCCESS
      PARAMETER (SCR_SUCCESS=0)

! constants
      INTEGER SCR_MAX_FILENAME
      PARAMETER (SCR_MAX_FILENAME=1024)

      INTEGER SCR_FLAG_NONE
      PARAMETER (SCR_FLAG_NONE=0)

      INTEGER SCR_FLAG_CHECKPOINT
      PARAMETER (SCR_FLAG_CHECKPOINT=1)

      INTEGER SCR_FLAG_OUTPUT
      PARAMETER (SCR_FLAG_OUTPUT=2)
