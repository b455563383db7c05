! cairn: the Fortran binding of cairn's C API (include/cairn/cairn.h), over ISO_C_BINDING.
!
!   use cairn
!   call cairn_init(MPI_COMM_WORLD)                  ! type(MPI_Comm) (use mpi_f08) or integer (use mpi)
!   call cairn_protect('grid', grid)                 ! any array, any rank; integer, real, complex, logical
!   call cairn_restart_available(available)
!   if (available) call cairn_restart()
!   call cairn_checkpoint()
!   call cairn_finalize()
!
! Every routine takes an optional last argument `ierror` (CAIRN_SUCCESS or a negative CAIRN_ERR_* code),
! as MPI's Fortran bindings do. Without it a failure prints the call, cairn_strerror and
! cairn_last_error on the error unit and stops the program (error stop), the way MPI's default error
! handler does; pass ierror to handle errors yourself. The contracts are those of the C functions of the
! same name (cairn.h); what is particular to Fortran is in docs/fortran.md.
module cairn
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: error_unit
#ifdef CAIRN_HAVE_MPI_F08
  use mpi_f08, only: MPI_Comm
#endif
  implicit none
  private

  ! CAIRN_SUCCESS and every CAIRN_ERR_* code, generated from include/cairn/cairn_errors.h.
  include 'cairn_error_codes.inc'

  ! Values of the C enums cairn_level and cairn_dist_kind (part of the C ABI, fixed).
  integer, parameter, public :: CAIRN_LEVEL_NONE = 0, CAIRN_LEVEL_L1 = 1, CAIRN_LEVEL_L2 = 2, CAIRN_LEVEL_L3 = 3
  integer(c_int), parameter, public :: CAIRN_DIST_PRIVATE = 0, CAIRN_DIST_REPLICATED = 1, CAIRN_DIST_BLOCK = 2, &
                                       CAIRN_DIST_BLOCK_CYCLIC = 3, CAIRN_DIST_BLOCK_ROWS = 4, CAIRN_DIST_BLOCK_COLS = 5

  ! How a region is spread over the ranks (struct cairn_distribution). BLOCK_ROWS splits the LAST
  ! dimension of a Fortran array a(cols, rows): C's rows are Fortran's columns (see docs/fortran.md).
  type, bind(C), public :: cairn_distribution
    integer(c_int) :: kind = CAIRN_DIST_PRIVATE
    integer(c_size_t) :: global_count = 0
    integer(c_size_t) :: block_size = 0
    integer(c_size_t) :: rows = 0
    integer(c_size_t) :: cols = 0
  end type cairn_distribution

  ! The resize callback of cairn_set_resize (cairn_resize_fn): return the address (c_loc) of a buffer of
  ! at least new_count elements, or c_null_ptr. `name` is a C string: cairn_c_string(name).
  abstract interface
    function cairn_resize_fn(name, new_count, user_data) bind(C) result(buffer)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: name
      integer(c_size_t), value :: new_count
      type(c_ptr), value :: user_data
      type(c_ptr) :: buffer
    end function cairn_resize_fn
  end interface
  public :: cairn_resize_fn

  public :: cairn_init, cairn_finalize
  public :: cairn_protect, cairn_protect_distributed, cairn_unprotect, cairn_checkpoint, cairn_wait
  public :: cairn_protect_device, cairn_device_stream, cairn_device_wait_copied
  public :: cairn_restart_available, cairn_restart, cairn_restart_level
  public :: cairn_local_count, cairn_set_resize, cairn_redistribute
  public :: cairn_route_file, cairn_start_output, cairn_complete_output
  public :: cairn_have_restart, cairn_start_restart, cairn_complete_restart
  public :: cairn_need_checkpoint, cairn_should_exit, cairn_probe_agents
  public :: cairn_strerror, cairn_last_error, cairn_c_string

  ! Communicators of either binding: type(MPI_Comm) from mpi_f08, or the integer handles of `use mpi`.
  interface cairn_init
    module procedure cairn_init_int
#ifdef CAIRN_HAVE_MPI_F08
    module procedure cairn_init_f08
#endif
  end interface cairn_init

  interface cairn_redistribute
    module procedure cairn_redistribute_int
#ifdef CAIRN_HAVE_MPI_F08
    module procedure cairn_redistribute_f08
#endif
  end interface cairn_redistribute

  ! ---- the C functions: the library's, and the shim's (cairn_fortran_shim.c) ----------------------------
  interface
    integer(c_int) function f_init(comm, config) bind(C, name='cairn_f_init')
      import :: c_int, c_char
      integer(c_int), value :: comm
      character(kind=c_char), intent(in) :: config(*)
    end function
    integer(c_int) function f_redistribute(comm) bind(C, name='cairn_f_redistribute')
      import :: c_int
      integer(c_int), value :: comm
    end function
    integer(c_int) function f_protect(name, array, dist) bind(C, name='cairn_f_protect')
      import :: c_int, c_char, cairn_distribution
      character(kind=c_char), intent(in) :: name(*)
      type(*), dimension(..) :: array
      type(cairn_distribution), intent(in), optional :: dist
    end function
    type(c_ptr) function f_last_error() bind(C, name='cairn_f_last_error')
      import :: c_ptr
    end function
    subroutine f_forget_refusal() bind(C, name='cairn_f_forget_refusal')
    end subroutine
    integer(c_int) function c_finalize() bind(C, name='cairn_finalize')
      import :: c_int
    end function
    integer(c_int) function c_protect_bytes(name, ptr, count, type) bind(C, name='cairn_protect')
      import :: c_int, c_char, c_ptr, c_size_t
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: ptr
      integer(c_size_t), value :: count
      integer(c_int), value :: type
    end function
    integer(c_int) function c_device_stream(stream) bind(C, name='cairn_device_stream')
      import :: c_int, c_ptr
      type(c_ptr), value :: stream
    end function
    integer(c_int) function c_device_wait_copied(stream) bind(C, name='cairn_device_wait_copied')
      import :: c_int, c_ptr
      type(c_ptr), value :: stream
    end function
    integer(c_int) function c_unprotect(name) bind(C, name='cairn_unprotect')
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: name(*)
    end function
    integer(c_int) function c_checkpoint() bind(C, name='cairn_checkpoint')
      import :: c_int
    end function
    integer(c_int) function c_wait() bind(C, name='cairn_wait')
      import :: c_int
    end function
    integer(c_int) function c_restart_available(available, version) bind(C, name='cairn_restart_available')
      import :: c_int
      integer(c_int), intent(out) :: available, version
    end function
    integer(c_int) function c_restart() bind(C, name='cairn_restart')
      import :: c_int
    end function
    integer(c_int) function c_restart_level(version, level) bind(C, name='cairn_restart_level')
      import :: c_int
      integer(c_int), intent(out) :: version, level
    end function
    integer(c_int) function c_local_count(dist, count) bind(C, name='cairn_local_count')
      import :: c_int, c_size_t, cairn_distribution
      type(cairn_distribution), intent(in) :: dist
      integer(c_size_t), intent(out) :: count
    end function
    integer(c_int) function c_set_resize(name, fn, user_data) bind(C, name='cairn_set_resize')
      import :: c_int, c_char, c_funptr, c_ptr
      character(kind=c_char), intent(in) :: name(*)
      type(c_funptr), value :: fn
      type(c_ptr), value :: user_data
    end function
    integer(c_int) function c_route_file(name, path, len) bind(C, name='cairn_route_file')
      import :: c_int, c_char, c_size_t
      character(kind=c_char), intent(in) :: name(*)
      character(kind=c_char), intent(out) :: path(*)
      integer(c_size_t), value :: len
    end function
    integer(c_int) function c_start_output(label, flags) bind(C, name='cairn_start_output')
      import :: c_int, c_ptr
      type(c_ptr), value :: label
      integer(c_int), value :: flags
    end function
    integer(c_int) function c_complete_output(valid) bind(C, name='cairn_complete_output')
      import :: c_int
      integer(c_int), value :: valid
    end function
    integer(c_int) function c_have_restart(available, label, len) bind(C, name='cairn_have_restart')
      import :: c_int, c_char, c_size_t
      integer(c_int), intent(out) :: available
      character(kind=c_char), intent(out) :: label(*)
      integer(c_size_t), value :: len
    end function
    integer(c_int) function c_start_restart(label, len) bind(C, name='cairn_start_restart')
      import :: c_int, c_char, c_size_t
      character(kind=c_char), intent(out) :: label(*)
      integer(c_size_t), value :: len
    end function
    integer(c_int) function c_complete_restart(valid) bind(C, name='cairn_complete_restart')
      import :: c_int
      integer(c_int), value :: valid
    end function
    integer(c_int) function c_need_checkpoint(flag) bind(C, name='cairn_need_checkpoint')
      import :: c_int
      integer(c_int), intent(out) :: flag
    end function
    integer(c_int) function c_should_exit(flag) bind(C, name='cairn_should_exit')
      import :: c_int
      integer(c_int), intent(out) :: flag
    end function
    integer(c_int) function c_probe_agents(changed) bind(C, name='cairn_probe_agents')
      import :: c_int
      integer(c_int), intent(out) :: changed
    end function
    type(c_ptr) function c_strerror(code) bind(C, name='cairn_strerror')
      import :: c_ptr, c_int
      integer(c_int), value :: code
    end function
    integer(c_size_t) function c_strlen(s) bind(C, name='strlen')
      import :: c_size_t, c_ptr
      type(c_ptr), value :: s
    end function
  end interface

contains

  ! ---- set-up ---------------------------------------------------------------------------------------

  !> Starts cairn on `comm` (collective). config: a TOML file; absent: defaults and CAIRN_* variables.
  subroutine cairn_init_int(comm, config, ierror)
    integer, intent(in) :: comm
    character(len=*), intent(in), optional :: config
    integer, intent(out), optional :: ierror
    if (present(config)) then
      call finish(f_init(int(comm, c_int), c_str(config)), 'cairn_init', ierror, shim=.true.)
    else
      call finish(f_init(int(comm, c_int), c_null_char), 'cairn_init', ierror, shim=.true.)
    end if
  end subroutine cairn_init_int

#ifdef CAIRN_HAVE_MPI_F08
  subroutine cairn_init_f08(comm, config, ierror)
    type(MPI_Comm), intent(in) :: comm
    character(len=*), intent(in), optional :: config
    integer, intent(out), optional :: ierror
    call cairn_init_int(comm%MPI_VAL, config, ierror)
  end subroutine cairn_init_f08
#endif

  !> Waits for background work, flushes the newest version if the policy asks, releases cairn (collective).
  subroutine cairn_finalize(ierror)
    integer, intent(out), optional :: ierror
    call finish(c_finalize(), 'cairn_finalize', ierror)
  end subroutine cairn_finalize

  ! ---- memory API -------------------------------------------------------------------------------------

  !> Registers (or updates) the region `name`: the whole of `array`, of any rank and type, which must be
  !> contiguous and stay allocated (give it the TARGET attribute) until cairn_unprotect or cairn_finalize.
  subroutine cairn_protect(name, array, ierror)
    character(len=*), intent(in) :: name
    type(*), dimension(..), target :: array
    integer, intent(out), optional :: ierror
    call finish(f_protect(c_str(name), array), 'cairn_protect', ierror, shim=.true.)
  end subroutine cairn_protect

  !> Like cairn_protect, with a distribution: size(array) must be cairn_local_count(dist).
  subroutine cairn_protect_distributed(name, array, dist, ierror)
    character(len=*), intent(in) :: name
    type(*), dimension(..), target :: array
    type(cairn_distribution), intent(in) :: dist
    integer, intent(out), optional :: ierror
    call finish(f_protect(c_str(name), array, dist), 'cairn_protect_distributed', ierror, shim=.true.)
  end subroutine cairn_protect_distributed

  !> Registers (or updates) the region `name`: `bytes` bytes at `ptr`, device (GPU) memory or host memory
  !> (a CUDA Fortran device array's c_loc, an OpenACC/OpenMP device address, cuMemAlloc's pointer). Its
  !> contract is cairn_protect's for device memory (include/cairn/cairn_device.h, docs/gpu.md).
  subroutine cairn_protect_device(name, ptr, bytes, ierror)
    character(len=*), intent(in) :: name
    type(c_ptr), intent(in) :: ptr
    integer(c_size_t), intent(in) :: bytes
    integer, intent(out), optional :: ierror
    call finish(c_protect_bytes(c_str(name), ptr, bytes, 0_c_int), 'cairn_protect_device', ierror)
  end subroutine cairn_protect_device

  !> The application's CUDA stream (c_null_ptr: none) whose queued work every later checkpoint's device
  !> copy follows (cairn_device_stream).
  subroutine cairn_device_stream(stream, ierror)
    type(c_ptr), intent(in) :: stream
    integer, intent(out), optional :: ierror
    call finish(c_device_stream(stream), 'cairn_device_stream', ierror)
  end subroutine cairn_device_stream

  !> Orders `stream`'s next work after the newest checkpoint's device copy, or with c_null_ptr waits for
  !> it here (cairn_device_wait_copied; needed before writing protected device memory with device_copy = return).
  subroutine cairn_device_wait_copied(stream, ierror)
    type(c_ptr), intent(in) :: stream
    integer, intent(out), optional :: ierror
    call finish(c_device_wait_copied(stream), 'cairn_device_wait_copied', ierror)
  end subroutine cairn_device_wait_copied

  subroutine cairn_unprotect(name, ierror)
    character(len=*), intent(in) :: name
    integer, intent(out), optional :: ierror
    call finish(c_unprotect(c_str(name)), 'cairn_unprotect', ierror)
  end subroutine cairn_unprotect

  !> Takes a new version of every protected region; returns after the node-local copy (collective).
  subroutine cairn_checkpoint(ierror)
    integer, intent(out), optional :: ierror
    call finish(c_checkpoint(), 'cairn_checkpoint', ierror)
  end subroutine cairn_checkpoint

  subroutine cairn_wait(ierror)
    integer, intent(out), optional :: ierror
    call finish(c_wait(), 'cairn_wait', ierror)
  end subroutine cairn_wait

  !> available: a version can be rebuilt completely; version: the newest such (collective).
  subroutine cairn_restart_available(available, version, ierror)
    logical, intent(out) :: available
    integer, intent(out), optional :: version
    integer, intent(out), optional :: ierror
    integer(c_int) :: c_available, c_version
    c_available = 0
    c_version = 0
    call finish(c_restart_available(c_available, c_version), 'cairn_restart_available', ierror)
    available = c_available /= 0
    if (present(version)) version = int(c_version)
  end subroutine cairn_restart_available

  !> Restores every protected region from the newest recoverable version (collective). A region whose
  !> size differs from the checkpoint's is CAIRN_ERR_SIZE_MISMATCH, and nothing is restored.
  subroutine cairn_restart(ierror)
    integer, intent(out), optional :: ierror
    call finish(c_restart(), 'cairn_restart', ierror)
  end subroutine cairn_restart

  subroutine cairn_restart_level(version, level, ierror)
    integer, intent(out), optional :: version, level
    integer, intent(out), optional :: ierror
    integer(c_int) :: c_version, c_level
    c_version = 0
    c_level = 0
    call finish(c_restart_level(c_version, c_level), 'cairn_restart_level', ierror)
    if (present(version)) version = int(c_version)
    if (present(level)) level = int(c_level)
  end subroutine cairn_restart_level

  ! ---- distributions ----------------------------------------------------------------------------------

  subroutine cairn_local_count(dist, count, ierror)
    type(cairn_distribution), intent(in) :: dist
    integer(c_size_t), intent(out) :: count
    integer, intent(out), optional :: ierror
    count = 0
    call finish(c_local_count(dist, count), 'cairn_local_count', ierror)
  end subroutine cairn_local_count

  !> Registers fn as the region's resize callback; without fn, removes it.
  subroutine cairn_set_resize(name, fn, user_data, ierror)
    character(len=*), intent(in) :: name
    procedure(cairn_resize_fn), optional :: fn
    type(c_ptr), intent(in), optional :: user_data
    integer, intent(out), optional :: ierror
    type(c_funptr) :: f
    type(c_ptr) :: data
    f = c_null_funptr
    data = c_null_ptr
    if (present(fn)) f = c_funloc(fn)
    if (present(user_data)) data = user_data
    call finish(c_set_resize(c_str(name), f, data), 'cairn_set_resize', ierror)
  end subroutine cairn_set_resize

  subroutine cairn_redistribute_int(new_comm, ierror)
    integer, intent(in) :: new_comm
    integer, intent(out), optional :: ierror
    call finish(f_redistribute(int(new_comm, c_int)), 'cairn_redistribute', ierror, shim=.true.)
  end subroutine cairn_redistribute_int

#ifdef CAIRN_HAVE_MPI_F08
  subroutine cairn_redistribute_f08(new_comm, ierror)
    type(MPI_Comm), intent(in) :: new_comm
    integer, intent(out), optional :: ierror
    call cairn_redistribute_int(new_comm%MPI_VAL, ierror)
  end subroutine cairn_redistribute_f08
#endif

  ! ---- file API ---------------------------------------------------------------------------------------

  !> path: where to write or read the file `name` (blank-padded); CAIRN_ERR_TRUNCATED when too short.
  subroutine cairn_route_file(name, path, ierror)
    character(len=*), intent(in) :: name
    character(len=*), intent(out) :: path
    integer, intent(out), optional :: ierror
    character(kind=c_char, len=len(path) + 1) :: buffer
    integer(c_int) :: rc
    buffer = c_null_char
    rc = c_route_file(c_str(name), buffer, int(len(buffer), c_size_t))
    path = from_c_buffer(buffer)
    call finish(rc, 'cairn_route_file', ierror)
  end subroutine cairn_route_file

  !> Begins a new version; label absent: "ckpt.<version>" (collective).
  subroutine cairn_start_output(label, flags, ierror)
    character(len=*), intent(in), optional :: label
    integer, intent(in), optional :: flags
    integer, intent(out), optional :: ierror
    character(kind=c_char, len=:), allocatable, target :: text
    integer(c_int) :: f
    f = 0
    if (present(flags)) f = int(flags, c_int)
    if (present(label)) then
      text = c_str(label)
      call finish(c_start_output(c_loc(text), f), 'cairn_start_output', ierror)
    else
      call finish(c_start_output(c_null_ptr, f), 'cairn_start_output', ierror)
    end if
  end subroutine cairn_start_output

  !> Ends the output; kept only if every rank passes valid = .true. (else CAIRN_ERR_INVALID_VERSION).
  subroutine cairn_complete_output(valid, ierror)
    logical, intent(in) :: valid
    integer, intent(out), optional :: ierror
    call finish(c_complete_output(merge(1_c_int, 0_c_int, valid)), 'cairn_complete_output', ierror)
  end subroutine cairn_complete_output

  !> available: a recoverable version exists; label: its label (collective).
  subroutine cairn_have_restart(available, label, ierror)
    logical, intent(out) :: available
    character(len=*), intent(out), optional :: label
    integer, intent(out), optional :: ierror
    character(kind=c_char, len=4096) :: buffer
    integer(c_int) :: c_available, rc
    integer :: room
    c_available = 0
    buffer = c_null_char
    room = len(buffer)
    if (present(label)) room = min(room, len(label) + 1)
    rc = c_have_restart(c_available, buffer, int(room, c_size_t))
    available = c_available /= 0
    if (present(label)) label = from_c_buffer(buffer)
    call finish(rc, 'cairn_have_restart', ierror)
  end subroutine cairn_have_restart

  !> Loads the newest recoverable version; its files become readable through cairn_route_file.
  subroutine cairn_start_restart(label, ierror)
    character(len=*), intent(out), optional :: label
    integer, intent(out), optional :: ierror
    character(kind=c_char, len=4096) :: buffer
    integer(c_int) :: rc
    integer :: room
    buffer = c_null_char
    room = len(buffer)
    if (present(label)) room = min(room, len(label) + 1)
    rc = c_start_restart(buffer, int(room, c_size_t))
    if (present(label)) label = from_c_buffer(buffer)
    call finish(rc, 'cairn_start_restart', ierror)
  end subroutine cairn_start_restart

  subroutine cairn_complete_restart(valid, ierror)
    logical, intent(in) :: valid
    integer, intent(out), optional :: ierror
    call finish(c_complete_restart(merge(1_c_int, 0_c_int, valid)), 'cairn_complete_restart', ierror)
  end subroutine cairn_complete_restart

  ! ---- policy -----------------------------------------------------------------------------------------

  !> flag: a checkpoint is due (interval, halt, end time, signal); the same on every rank (collective).
  subroutine cairn_need_checkpoint(flag, ierror)
    logical, intent(out) :: flag
    integer, intent(out), optional :: ierror
    call flag_out(c_need_checkpoint, 'cairn_need_checkpoint', flag, ierror)
  end subroutine cairn_need_checkpoint

  !> flag: the job should exit now; the same on every rank (collective).
  subroutine cairn_should_exit(flag, ierror)
    logical, intent(out) :: flag
    integer, intent(out), optional :: ierror
    call flag_out(c_should_exit, 'cairn_should_exit', flag, ierror)
  end subroutine cairn_should_exit

  !> changed: this rank's service agent changed since the last call (dynamic agents); local, not collective.
  subroutine cairn_probe_agents(changed, ierror)
    logical, intent(out) :: changed
    integer, intent(out), optional :: ierror
    call flag_out(c_probe_agents, 'cairn_probe_agents', changed, ierror)
  end subroutine cairn_probe_agents

  ! A C call with one int flag out, as a logical.
  subroutine flag_out(fn, call, flag, ierror)
    procedure(c_need_checkpoint) :: fn
    character(len=*), intent(in) :: call
    logical, intent(out) :: flag
    integer, intent(out), optional :: ierror
    integer(c_int) :: c_flag
    c_flag = 0
    call finish(fn(c_flag), call, ierror)
    flag = c_flag /= 0
  end subroutine flag_out

  ! ---- errors -----------------------------------------------------------------------------------------

  !> The description of an error code.
  function cairn_strerror(code) result(text)
    integer, intent(in) :: code
    character(len=:), allocatable :: text
    text = cairn_c_string(c_strerror(int(code, c_int)))
  end function cairn_strerror

  !> The detail of this thread's last failed cairn call (call, rank, path, errno), or ''.
  function cairn_last_error() result(text)
    character(len=:), allocatable :: text
    text = cairn_c_string(f_last_error())
  end function cairn_last_error

  !> A NUL-terminated C string (such as a resize callback's name) as a Fortran string.
  function cairn_c_string(ptr) result(text)
    type(c_ptr), intent(in) :: ptr
    character(len=:), allocatable :: text
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(ptr)) then
      text = ''
      return
    end if
    n = int(c_strlen(ptr))
    call c_f_pointer(ptr, chars, [n])
    allocate(character(len=n) :: text)
    do i = 1, n
      text(i:i) = chars(i)
    end do
  end function cairn_c_string

  ! ---- helpers ----------------------------------------------------------------------------------------

  ! A Fortran string as a C string: trailing blanks dropped, NUL appended.
  pure function c_str(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: c
    c = trim(s) // c_null_char
  end function c_str

  ! The text of a NUL-terminated C buffer, without the NUL.
  pure function from_c_buffer(buffer) result(text)
    character(len=*), intent(in) :: buffer
    character(len=:), allocatable :: text
    integer :: n
    n = index(buffer, c_null_char) - 1
    if (n < 0) n = len(buffer)
    text = buffer(1:n)
  end function from_c_buffer

  ! Hands a return code to the caller's ierror, or, without one, stops on a failure with its detail.
  ! shim: the call went through cairn_fortran_shim.c, which may have refused it itself.
  subroutine finish(rc, call, ierror, shim)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: call
    integer, intent(out), optional :: ierror
    logical, intent(in), optional :: shim
    if (.not. present(shim)) call f_forget_refusal()
    if (present(ierror)) then
      ierror = int(rc)
    else if (rc /= CAIRN_SUCCESS) then
      write(error_unit, '(a)') 'cairn: ' // call // ' failed: ' // cairn_strerror(int(rc)) // ': ' // &
                               cairn_last_error()
      flush(error_unit)
      error stop 1
    end if
  end subroutine finish

end module cairn
