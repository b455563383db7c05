! Every routine of the Fortran module cairn, with its error paths, on 4 ranks (2 simulated nodes).
! Each check runs on every rank in the same order; the first failure prints the rank and the check and
! aborts the job. With the argument --stop-without-ierror it instead calls cairn_checkpoint before
! cairn_init without ierror, which must print the failure and stop the program (the test of that mode
! matches the message).
module resize_target
  use, intrinsic :: iso_c_binding
  implicit none
  real(c_double), pointer :: grown(:) => null()
  logical :: refuse = .false.
contains
  ! cairn_resize_fn: a new buffer of new_count elements for the region, or NULL when told to refuse.
  function resize_grid(name, new_count, user_data) bind(C) result(buffer)
    use cairn, only: cairn_c_string
    type(c_ptr), value :: name
    integer(c_size_t), value :: new_count
    type(c_ptr), value :: user_data
    type(c_ptr) :: buffer
    integer(c_int), pointer :: calls
    call c_f_pointer(user_data, calls)
    calls = calls + 1
    buffer = c_null_ptr
    if (refuse .or. cairn_c_string(name) /= 'g') return
    allocate(grown(new_count))
    grown = -1
    buffer = c_loc(grown)
  end function resize_grid
end module resize_target

program fortran_api_test
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: int8, int16, int64, real32, real64, error_unit, output_unit
  use mpi_f08
  use cairn
  use resize_target
  implicit none

  type :: point
    real(real64) :: x
    integer :: n
  end type point

  integer :: rank, nprocs, ierr, provided, i, version, level, calls_made
  character(len=512) :: work, arg
  logical :: flag

  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  if (command_argument_count() > 0) then
    call get_command_argument(1, arg)
    if (arg == '--stop-without-ierror') call cairn_checkpoint()  ! stops here
  end if
  call expect(nprocs == 4, 'runs on 4 ranks')
  call scratch_space()

  call before_init()
  call init_and_its_errors()
  call every_kind_and_rank()
  call what_cannot_be_protected()
  call wrong_size_restart()
  call distributions_and_redistribute()
  call the_file_api()

  call MPI_Barrier(MPI_COMM_WORLD)
  if (rank == 0) then
    call execute_command_line('rm -rf ' // trim(work))
    write(output_unit, '(a)') 'fortran_api: every check passed on 4 ranks'
  end if
  call MPI_Finalize()

contains

  subroutine expect(condition, what)
    logical, intent(in) :: condition
    character(len=*), intent(in) :: what
    if (.not. condition) then
      write(error_unit, '(a,i0,3a)') 'FAIL rank ', rank, ': ', what, '; cairn_last_error: ' // cairn_last_error()
      flush(error_unit)
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
  end subroutine expect

  subroutine expect_code(got, want, what)
    integer, intent(in) :: got, want
    character(len=*), intent(in) :: what
    character(len=32) :: text
    write(text, '(a,i0,a,i0)') ' (got ', got, ', want ', want
    call expect(got == want, what // trim(text) // ')')
  end subroutine expect_code

  subroutine passed(what)
    character(len=*), intent(in) :: what
    call MPI_Barrier(MPI_COMM_WORLD)
    if (rank == 0) write(output_unit, '(2a)') 'ok   - ', what
    flush(output_unit)
  end subroutine passed

  ! A scratch prefix and cache (rank 0 makes the directory), 2 simulated nodes, and a job name per check.
  subroutine scratch_space()
    integer :: pid
    interface
      integer(c_int) function getpid() bind(C, name='getpid')
        import :: c_int
      end function getpid
      integer(c_int) function setenv(name, value, overwrite) bind(C, name='setenv')
        import :: c_int, c_char
        character(kind=c_char), intent(in) :: name(*), value(*)
        integer(c_int), value :: overwrite
      end function setenv
    end interface
    pid = getpid()
    call MPI_Bcast(pid, 1, MPI_INTEGER, 0, MPI_COMM_WORLD)
    write(work, '(a,i0)') '/tmp/cairn-fortran-api-', pid
    if (rank == 0) call execute_command_line('rm -rf ' // trim(work) // ' && mkdir -p ' // trim(work))
    call MPI_Barrier(MPI_COMM_WORLD)
    call expect(setenv('CAIRN_PREFIX' // c_null_char, trim(work) // '/prefix' // c_null_char, 1) == 0, 'setenv')
    call expect(setenv('CAIRN_CACHE_DIR' // c_null_char, trim(work) // '/cache' // c_null_char, 1) == 0, 'setenv')
    call expect(setenv('CAIRN_REDUNDANCY' // c_null_char, 'partner' // c_null_char, 1) == 0, 'setenv')
    call expect(setenv('CAIRN_NODE' // c_null_char, merge('node0', 'node1', rank < 2) // c_null_char, 1) == 0, &
                'setenv')
    call expect(setenv('CAIRN_JOB' // c_null_char, trim(work(6:)) // c_null_char, 1) == 0, 'setenv')
  end subroutine scratch_space

  subroutine new_job(name)
    character(len=*), intent(in) :: name
    interface
      integer(c_int) function setenv(n, v, overwrite) bind(C, name='setenv')
        import :: c_int, c_char
        character(kind=c_char), intent(in) :: n(*), v(*)
        integer(c_int), value :: overwrite
      end function setenv
    end interface
    ! A job of its own, on a prefix of its own: one job per prefix.
    call expect(setenv('CAIRN_JOB' // c_null_char, 'fapi-' // name // c_null_char, 1) == 0, 'setenv')
    call expect(setenv('CAIRN_PREFIX' // c_null_char, trim(work) // '/prefix-' // name // c_null_char, 1) == 0, &
                'setenv')
  end subroutine new_job

  subroutine before_init()
    call cairn_checkpoint(ierr)
    call expect_code(ierr, CAIRN_ERR_NOT_INITIALIZED, 'cairn_checkpoint before cairn_init')
    call expect(index(cairn_last_error(), 'cairn_init') > 0, 'the detail names cairn_init')
    call expect(cairn_strerror(CAIRN_ERR_IO) == 'I/O error', 'cairn_strerror')
    call expect(cairn_strerror(CAIRN_SUCCESS) == 'success', 'cairn_strerror(0)')
    call expect(CAIRN_ERR_INTERNAL == -99 .and. CAIRN_ERR_TRUNCATED == -18 .and. CAIRN_ERR_CANCELLED == -20, &
                'the generated constants')
    call cairn_finalize(ierr)
    call expect_code(ierr, CAIRN_ERR_NOT_INITIALIZED, 'cairn_finalize before cairn_init')
    call passed('before cairn_init: error codes, cairn_strerror, cairn_last_error')
  end subroutine before_init

  subroutine init_and_its_errors()
    integer :: unit
    call new_job('init')
    if (rank == 0) then
      open(newunit=unit, file=trim(work) // '/bad.toml', status='replace')
      write(unit, '(a)') 'no_such_knob = 1'
      close(unit)
    end if
    call MPI_Barrier(MPI_COMM_WORLD)
    call cairn_init(MPI_COMM_WORLD, trim(work) // '/bad.toml', ierr)
    call expect_code(ierr, CAIRN_ERR_CONFIG, 'cairn_init with an unknown knob')
    call expect(index(cairn_last_error(), 'no_such_knob') > 0, 'the detail names the knob')
    call cairn_init(MPI_COMM_WORLD, ierror=ierr)  ! type(MPI_Comm)
    call expect_code(ierr, CAIRN_SUCCESS, 'cairn_init(type(MPI_Comm))')
    call cairn_init(MPI_COMM_WORLD%MPI_VAL, ierror=ierr)
    call expect_code(ierr, CAIRN_ERR_ALREADY_INITIALIZED, 'cairn_init twice')
    call cairn_restart_available(flag, version, ierr)
    call expect(ierr == CAIRN_SUCCESS .and. .not. flag, 'nothing to restart')
    call cairn_restart(ierr)
    call expect_code(ierr, CAIRN_ERR_NO_CHECKPOINT, 'cairn_restart without a checkpoint')
    call cairn_restart_level(version, level, ierr)
    call expect(ierr == 0 .and. version == 0 .and. level == CAIRN_LEVEL_NONE, 'cairn_restart_level before one')
    call cairn_need_checkpoint(flag, ierr)
    call expect(ierr == 0 .and. .not. flag, 'cairn_need_checkpoint')
    call cairn_should_exit(flag, ierr)
    call expect(ierr == 0 .and. .not. flag, 'cairn_should_exit')
    call cairn_wait(ierr)
    call expect_code(ierr, CAIRN_SUCCESS, 'cairn_wait')
    call cairn_finalize(ierr)
    call expect_code(ierr, CAIRN_SUCCESS, 'cairn_finalize')
    call cairn_init(MPI_COMM_WORLD%MPI_VAL, ierror=ierr)  ! an integer communicator, as with `use mpi`
    call expect_code(ierr, CAIRN_SUCCESS, 'cairn_init(integer)')
    call cairn_finalize()
    call passed('cairn_init with either communicator, a bad config, twice; the policy calls; cairn_finalize')
  end subroutine init_and_its_errors

  subroutine every_kind_and_rank()
    integer(int8), target :: i1(5)
    integer(int16), target :: i2(2, 2)
    integer, target :: i4(3, 2, 2)
    integer(int64), target :: i8
    real(real32), target :: r4(4)
    real(real64), allocatable, target :: r8(:, :)
    complex(real32), target :: c4(3)
    complex(real64), target :: c8(2, 2)
    logical, target :: l4(6)
    logical(c_bool), target :: lb(3)
    character(len=3), target :: ch(2)
    type(point), target :: pts(2)
    real(real64), target :: raw(5)  ! by address and size (cairn_protect_device: host memory here)
    call new_job('kinds')
    raw = [(real(i, real64) * 3 + rank, i = 1, 5)]
    allocate(r8(3, 0:4))
    i1 = [(int(i + rank, int8), i = 1, 5)]
    i2 = reshape([1_int16, 2_int16, 3_int16, int(rank, int16)], [2, 2])
    i4 = reshape([(i * 10 + rank, i = 1, 12)], [3, 2, 2])
    i8 = 8000000000_int64 + rank
    r4 = [(real(i, real32) / 4 + rank, i = 1, 4)]
    r8 = 0
    r8(:, 1:3) = rank + 0.5_real64
    c4 = cmplx(rank, -1, real32)
    c8 = cmplx(2, rank, real64)
    l4 = [(mod(i + rank, 2) == 0, i = 1, 6)]
    lb = logical([.true., .false., .true.], c_bool)
    ch = ['ab' // achar(48 + rank), 'xyz']
    pts = point(1.5_real64, rank)
    call cairn_init(MPI_COMM_WORLD)
    call cairn_protect('i1', i1)
    call cairn_protect('i2', i2)
    call cairn_protect('i4', i4)
    call cairn_protect('i8', i8)   ! a scalar: rank 0
    call cairn_protect('r4', r4)
    call cairn_protect('r8', r8(:, 1:3))  ! a contiguous section
    call cairn_protect('c4', c4)
    call cairn_protect('c8', c8)
    call cairn_protect('l4', l4)
    call cairn_protect('lb', lb)
    call cairn_protect('ch', ch)
    call cairn_protect('pts', pts)
    call cairn_protect_device('raw', c_loc(raw), int(storage_size(raw) / 8 * size(raw), c_size_t))
    call cairn_device_stream(c_null_ptr)
    call cairn_checkpoint()
    call cairn_device_wait_copied(c_null_ptr)  ! no device region: returns at once
    i1 = 0; i2 = 0; i4 = 0; i8 = 0; r4 = 0; r8 = 0; c4 = 0; c8 = 0; l4 = .false.; lb = .false.; ch = ''
    pts = point(0, 0)
    raw = 0
    call cairn_restart_available(flag, version)
    call expect(flag .and. version == 1, 'version 1 is available')
    call cairn_restart()
    call cairn_restart_level(version, level)
    call expect(version == 1 .and. level == CAIRN_LEVEL_L1, 'restarted from version 1 at L1')
    call expect(all(i1 == [(int(i + rank, int8), i = 1, 5)]), 'integer(1) restored')
    call expect(all(i2 == reshape([1_int16, 2_int16, 3_int16, int(rank, int16)], [2, 2])), 'integer(2) restored')
    call expect(all(i4 == reshape([(i * 10 + rank, i = 1, 12)], [3, 2, 2])), 'integer(4), rank 3, restored')
    call expect(i8 == 8000000000_int64 + rank, 'integer(8) scalar restored')
    call expect(all(r4 == [(real(i, real32) / 4 + rank, i = 1, 4)]), 'real(4) restored')
    call expect(all(r8(:, 1:3) == rank + 0.5_real64) .and. all(r8(:, 0) == 0) .and. all(r8(:, 4) == 0), &
                'real(8) section restored, and only it')
    call expect(all(c4 == cmplx(rank, -1, real32)), 'complex(4) restored')
    call expect(all(c8 == cmplx(2, rank, real64)), 'complex(8) restored')
    call expect(all(l4 .eqv. [(mod(i + rank, 2) == 0, i = 1, 6)]), 'logical restored')
    call expect(logical(all(lb .eqv. logical([.true., .false., .true.], c_bool))), 'logical(c_bool) restored')
    call expect(all(ch == ['ab' // achar(48 + rank), 'xyz']), 'character(len=3) restored')
    call expect(all(pts%x == 1.5_real64) .and. all(pts%n == rank), 'derived type restored')
    call expect(all(raw == [(real(i, real64) * 3 + rank, i = 1, 5)]), 'cairn_protect_device (c_ptr, bytes) restored')
    call cairn_unprotect('ch', ierr)
    call expect_code(ierr, CAIRN_SUCCESS, 'cairn_unprotect')
    call cairn_unprotect('ch', ierr)
    call expect_code(ierr, CAIRN_ERR_UNKNOWN_REGION, 'cairn_unprotect of an unknown region')
    call cairn_finalize()
    call passed('cairn_protect of integer(1/2/4/8), real(4/8), complex(4/8), logical, c_bool, character, '// &
                'derived types of rank 0..3; cairn_checkpoint, cairn_restart, cairn_unprotect')
  end subroutine every_kind_and_rank

  subroutine what_cannot_be_protected()
    real(real64), target :: x(10), y(4, 4)
    integer(int16), target :: halves(6)
    type(cairn_distribution) :: block
    call new_job('refused')
    call cairn_init(MPI_COMM_WORLD)
    call cairn_protect('strided', x(1:10:2), ierr)
    call expect_code(ierr, CAIRN_ERR_INVALID_ARG, 'a strided section')
    call expect(index(cairn_last_error(), "cairn_protect('strided'): the array is not contiguous") > 0, &
                'the detail says why')
    call cairn_protect('rows', y(1:2, :), ierr)
    call expect_code(ierr, CAIRN_ERR_INVALID_ARG, 'a section of rows of a 2-D array')
    call cairn_unprotect('nope', ierr)  ! a library error after the binding's own refusal
    call expect(index(cairn_last_error(), 'cairn_unprotect') > 0, 'the last error is the newest call''s')
    call cairn_protect('', x, ierr)
    call expect_code(ierr, CAIRN_ERR_INVALID_ARG, 'an empty name')
    block = cairn_distribution(kind=CAIRN_DIST_BLOCK, global_count=6 * nprocs)
    call cairn_protect_distributed('halves', halves, block, ierr)
    call expect_code(ierr, CAIRN_ERR_NOT_SUPPORTED, 'integer(2) in a BLOCK distribution')
    call expect(index(cairn_last_error(), 'cannot count them') > 0, 'the detail says why')
    call cairn_protect_distributed('halves', halves, cairn_distribution(kind=CAIRN_DIST_REPLICATED), ierr)
    call expect_code(ierr, CAIRN_SUCCESS, 'integer(2) replicated')
    call cairn_finalize()
    call passed('non-contiguous arrays, empty names and uncountable elements are refused with their reason')
  end subroutine what_cannot_be_protected

  subroutine wrong_size_restart()
    real(real64), target :: a(6), bigger(7)
    call new_job('size')
    a = [(i + rank, i = 1, 6)]
    call cairn_init(MPI_COMM_WORLD)
    call cairn_protect('a', a)
    call cairn_checkpoint()
    call cairn_finalize()
    call cairn_init(MPI_COMM_WORLD)
    bigger = 0
    call cairn_protect('a', bigger)
    call cairn_restart(ierr)
    call expect_code(ierr, CAIRN_ERR_SIZE_MISMATCH, 'a restart into a bigger array')
    call expect(index(cairn_last_error(), '56 bytes protected now, 48 bytes') > 0, 'the detail gives both sizes')
    call expect(all(bigger == 0), 'nothing restored')
    a = 0
    call cairn_protect('a', a)
    call cairn_restart()
    call expect(all(a == [(i + rank, i = 1, 6)]), 'restored into the right size')
    call cairn_finalize()
    call passed('a restart into an array of the wrong size is CAIRN_ERR_SIZE_MISMATCH')
  end subroutine wrong_size_restart

  subroutine distributions_and_redistribute()
    type(cairn_distribution) :: block
    integer(c_size_t) :: count
    real(c_double), allocatable, target :: mine(:), wrong(:)
    integer(c_int), target :: calls
    type(MPI_Comm) :: sub, new_comm
    logical :: stay
    call new_job('dist')
    call cairn_init(MPI_COMM_WORLD)
    block = cairn_distribution(kind=CAIRN_DIST_BLOCK, global_count=12)
    call cairn_local_count(block, count)
    call expect(count == 3, 'cairn_local_count of BLOCK 12 on 4 ranks')
    call cairn_local_count(cairn_distribution(kind=CAIRN_DIST_BLOCK_CYCLIC, global_count=10, block_size=2), count)
    call expect(count == merge(4, 2, rank == 0), 'cairn_local_count of BLOCK_CYCLIC 10 by 2')
    call cairn_local_count(cairn_distribution(kind=CAIRN_DIST_BLOCK_CYCLIC, global_count=10), count, ierr)
    call expect_code(ierr, CAIRN_ERR_INVALID_ARG, 'BLOCK_CYCLIC without a block size')
    allocate(wrong(4), mine(3))
    call cairn_protect_distributed('g', wrong, block, ierr)
    call expect_code(ierr, CAIRN_ERR_SIZE_MISMATCH, 'a local count that is not cairn_local_count')
    mine = [(real(3 * rank + i - 1, c_double), i = 1, 3)]
    call cairn_protect_distributed('g', mine, block)
    calls = 0
    call cairn_set_resize('g', resize_grid, c_loc(calls))
    ! ranks 0 and 1 stay, 2 and 3 leave (MPI_COMM_NULL); a refusing callback fails the call everywhere
    stay = rank < 2
    call MPI_Comm_split(MPI_COMM_WORLD, merge(0, MPI_UNDEFINED, stay), rank, sub)
    new_comm = sub
    refuse = .true.
    call cairn_redistribute(new_comm, ierr)
    call expect_code(ierr, CAIRN_ERR_NO_MEMORY, 'a resize callback that returns NULL')
    call expect(calls == merge(1, 0, stay), 'the callback was called on the ranks that stay')
    refuse = .false.
    call cairn_redistribute(new_comm, ierr)
    call expect_code(ierr, CAIRN_SUCCESS, 'cairn_redistribute(type(MPI_Comm))')
    if (stay) then
      call expect(associated(grown), 'the callback gave the region a new buffer')
      call expect(all(grown == [(real(6 * rank + i - 1, c_double), i = 1, 6)]), 'the data moved into it')
      call cairn_local_count(block, count)
      call expect(count == 6, 'cairn_local_count on the new communicator')
      call cairn_set_resize('g', ierror=ierr)
      call expect_code(ierr, CAIRN_SUCCESS, 'cairn_set_resize without a callback')
      call cairn_checkpoint()
      call cairn_finalize()
      call MPI_Comm_free(sub)
    else
      call cairn_checkpoint(ierr)
      call expect_code(ierr, CAIRN_ERR_NOT_INITIALIZED, 'a rank that left is finalized')
    end if
    call passed('cairn_local_count, cairn_protect_distributed, cairn_set_resize, cairn_redistribute')
  end subroutine distributions_and_redistribute

  subroutine the_file_api()
    character(len=256) :: path, label
    character(len=8) :: short
    character(len=40) :: text
    integer(int64), target :: meta
    integer :: unit
    call new_job('files')
    call cairn_init(MPI_COMM_WORLD)
    meta = rank
    call cairn_protect('meta', meta)
    call cairn_complete_output(.true., ierr)
    call expect_code(ierr, CAIRN_ERR_SEQUENCE, 'cairn_complete_output without an output')
    call cairn_route_file('plain.dat', path)
    call expect(path == 'plain.dat', 'outside an output the name is the path')
    call cairn_start_output('step-1')
    call cairn_route_file('rank' // achar(48 + rank) // '.dat', path)
    call cairn_route_file('rank' // achar(48 + rank) // '.dat', short, ierr)
    call expect_code(ierr, CAIRN_ERR_TRUNCATED, 'cairn_route_file into a short string')
    open(newunit=unit, file=trim(path), status='replace', action='write')
    write(unit, '(a,i0)') 'one from ', rank
    close(unit)
    call cairn_complete_output(.true.)
    call cairn_start_output('step-2', 0)
    call cairn_route_file('rank' // achar(48 + rank) // '.dat', path)
    open(newunit=unit, file=trim(path), status='replace', action='write')
    write(unit, '(a,i0)') 'two from ', rank
    close(unit)
    call cairn_complete_output(rank /= 2, ierr)  ! rank 2 declares it invalid
    call expect_code(ierr, CAIRN_ERR_INVALID_VERSION, 'a version one rank declared invalid')
    call cairn_start_output(ierror=ierr)  ! no label: "ckpt.<version>"
    call expect_code(ierr, CAIRN_SUCCESS, 'cairn_start_output without a label')
    call cairn_complete_output(.true.)
    call cairn_route_file('a/b', path, ierr)
    call expect_code(ierr, CAIRN_ERR_INVALID_ARG, 'a routed name with a slash')
    call cairn_have_restart(flag, label)
    call expect(flag .and. label(1:5) == 'ckpt.', 'cairn_have_restart offers the unlabelled version')
    call cairn_have_restart(flag, short, ierr)
    call expect(ierr == CAIRN_SUCCESS .or. ierr == CAIRN_ERR_TRUNCATED, 'cairn_have_restart into a short label')
    call cairn_start_restart(label)
    call expect(label(1:5) == 'ckpt.', 'cairn_start_restart gives the label')
    call cairn_complete_restart(rank /= 1, ierr)  ! rank 1 rejects it
    call expect_code(ierr, CAIRN_ERR_INVALID_VERSION, 'a restart one rank rejected')
    call cairn_have_restart(flag, label)
    call expect(flag .and. label == 'step-1', 'then step-1 is offered (step-2 was never taken)')
    meta = -1
    call cairn_start_restart()
    call cairn_route_file('rank' // achar(48 + rank) // '.dat', path)
    open(newunit=unit, file=trim(path), status='old', action='read')
    read(unit, '(a)') text
    close(unit)
    call expect(text == 'one from ' // achar(48 + rank), 'the file of step-1 reads back')
    call expect(meta == rank, 'and the protected region with it')
    call cairn_complete_restart(.true.)
    call cairn_finalize()
    call passed('the file API: cairn_start_output, cairn_route_file, cairn_complete_output, cairn_have_restart, ' // &
                'cairn_start_restart, cairn_complete_restart')
  end subroutine the_file_api

end program fortran_api_test
