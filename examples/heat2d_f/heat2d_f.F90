! heat2d_f: examples/heat2d/heat2d.c in Fortran, through the module cairn (docs/fortran.md).
!
! The same 2-D Jacobi problem, decomposition, checkpointed state and output: an n x n grid split by rows
! over the ranks (the first mod(n, P) ranks get one extra row), the top edge 100.0, the other edges and
! the interior 0.0; "grid" (the rank's rows, BLOCK_ROWS, without halos) and "iter" (int64, REPLICATED)
! are protected, so a checkpoint written by heat2d, heat2d_f or heat2d.py restarts in any of them. The
! `result` line is the FNV-1a 64 hash of the global grid's bytes in row-major order, equal to heat2d's.
!
! A C row is contiguous, so a rank's grid is u(n, 0:rows+1): u(c, r) is column c of local row r (rows 0
! and rows+1 are the halos). Fortran's column-major u(:, r) is C's row r, and the memory matches heat2d's.
!
! Usage: heat2d_f [--n N] [--iters I] [--checkpoint-every K] [--sleep-ms S] [--no-restart]
program heat2d_f
  use, intrinsic :: iso_c_binding, only: c_int, c_size_t
  use, intrinsic :: iso_fortran_env, only: int8, int64, real64, output_unit, error_unit
  use mpi_f08
  use cairn
  implicit none

  real(real64), parameter :: top_edge = 100.0_real64
  integer(int64) :: n = 256, iters = 1000, checkpoint_every = 100, sleep_ms = 0
  logical :: no_restart = .false.
  integer :: rank, nprocs, provided, rows, first_row, max_rows, base_rows, extra, version, level, status
  real(real64), allocatable, target :: a(:, :), b(:, :)
  logical :: cur_is_a, available, due, flag
  integer(int64), target :: iter
  character(len=16) :: hash

  call MPI_Init_thread(MPI_THREAD_MULTIPLE, provided)  ! cairn copes with any level
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)

  status = parse_options()
  if (status /= 0) then
    if (rank == 0) call usage(merge(output_unit, error_unit, status > 0))
    call MPI_Finalize()
    if (status > 0) stop
    error stop 2
  end if

  base_rows = int(n / nprocs)
  extra = int(mod(n, int(nprocs, int64)))
  max_rows = base_rows + merge(1, 0, extra > 0)
  if (base_rows < 1 .or. real(max_rows, real64) * real(n, real64) > real(huge(1), real64)) then
    if (rank == 0) write(error_unit, '(a,i0,a,i0,a)') 'heat2d_f: --n ', n, ' does not fit ', nprocs, &
                                                     ' ranks (need n >= ranks and rows*n < 2^31)'
    call MPI_Finalize()
    error stop 2
  end if
  rows = base_rows + merge(1, 0, rank < extra)
  first_row = rank * base_rows + min(rank, extra)
  allocate(a(n, 0:rows + 1), b(n, 0:rows + 1))
  call initialize(a)
  call initialize(b)
  cur_is_a = .true.

  call cairn_init(MPI_COMM_WORLD)
  iter = 0
  call protect_state()

  if (rank == 0) then
    write(output_unit, '(a,i0,a,i0,a,i0,a,i0,2a)') 'heat2d_f: n=', n, ' ranks=', nprocs, ' iters=', iters, &
        ' checkpoint-every=', checkpoint_every, ' thread-level=', &
        trim(merge('multiple      ', 'below-multiple', provided >= MPI_THREAD_MULTIPLE))
    flush(output_unit)
  end if

  if (.not. no_restart) then
    call cairn_restart_available(available, version, ierror=status)
    if (status == CAIRN_ERR_UNRECOVERABLE .and. rank == 0) &
      write(error_unit, '(a)') 'heat2d_f: checkpoints exist but none can be rebuilt; --no-restart starts over'
    call check(status, 'cairn_restart_available')
    if (available) then
      call cairn_restart()
      call cairn_restart_level(version, level)
      if (iter < 0 .or. iter > iters) then
        if (rank == 0) write(error_unit, '(a,i0,a,i0,a,i0)') 'heat2d_f: checkpoint version ', version, &
            ' is at iteration ', iter, ', outside 0..--iters ', iters
        call MPI_Abort(MPI_COMM_WORLD, 2)
      end if
      if (rank == 0) then
        write(output_unit, '(a,i0,2a)') 'restart: version ', version, ' from level ', trim(level_name(level))
        write(output_unit, '(a,i0)') 'heat2d_f: resuming at iteration ', iter
        flush(output_unit)
      end if
    end if
  end if

  do while (iter < iters)
    if (cur_is_a) then
      call exchange_halos(a)
      call sweep(a, b)
    else
      call exchange_halos(b)
      call sweep(b, a)
    end if
    cur_is_a = .not. cur_is_a
    iter = iter + 1
    call pause_ms(sleep_ms)

    due = checkpoint_every > 0 .and. mod(iter, max(checkpoint_every, 1_int64)) == 0 .and. iter < iters
    call cairn_need_checkpoint(flag)
    if (due .or. flag) then
      call protect_state()  ! the current buffer changes with every sweep
      call cairn_checkpoint()
    end if

    call cairn_should_exit(flag)
    if (flag) then
      if (rank == 0) then
        write(output_unit, '(a,i0)') 'heat2d_f: exiting on request at iteration ', iter
        flush(output_unit)
      end if
      call cairn_finalize()
      call MPI_Finalize()
      stop
    end if
  end do

  if (cur_is_a) then
    hash = hash_global_grid(a)
  else
    hash = hash_global_grid(b)
  end if
  call cairn_finalize()  ! before printing, so `result` stays the last line whatever cairn logs
  if (rank == 0) then
    write(output_unit, '(2a)') 'result ', hash
    flush(output_unit)
  end if
  call MPI_Finalize()

contains

  ! 0 on success, 1 for --help, -1 (message printed on rank 0) on bad input.
  integer function parse_options()
    character(len=256) :: arg, value
    integer :: i, nargs, ios
    integer(int64) :: parsed
    parse_options = 0
    nargs = command_argument_count()
    i = 1
    do while (i <= nargs)
      call get_command_argument(i, arg)
      if (arg == '--help' .or. arg == '-h') then
        parse_options = 1
        return
      end if
      if (arg == '--no-restart') then
        no_restart = .true.
        i = i + 1
        cycle
      end if
      if (arg /= '--n' .and. arg /= '--iters' .and. arg /= '--checkpoint-every' .and. arg /= '--sleep-ms') then
        if (rank == 0) write(error_unit, '(3a)') "heat2d_f: unknown option '", trim(arg), "'"
        parse_options = -1
        return
      end if
      value = '(nothing)'
      ios = 1
      if (i + 1 <= nargs) then
        call get_command_argument(i + 1, value)
        if (verify(trim(value), '0123456789') == 0 .and. len_trim(value) > 0) read(value, *, iostat=ios) parsed
      end if
      if (ios /= 0) then
        if (rank == 0) write(error_unit, '(5a)') 'heat2d_f: ', trim(arg), " needs a non-negative integer, got '", &
                                                 trim(value), "'"
        parse_options = -1
        return
      end if
      select case (arg)
      case ('--n')
        n = parsed
      case ('--iters')
        iters = parsed
      case ('--checkpoint-every')
        checkpoint_every = parsed
      case ('--sleep-ms')
        sleep_ms = parsed
      end select
      i = i + 2
    end do
    if (n < 3) then
      if (rank == 0) write(error_unit, '(a,i0)') 'heat2d_f: --n must be at least 3, got ', n
      parse_options = -1
    end if
  end function parse_options

  subroutine usage(unit)
    integer, intent(in) :: unit
    write(unit, '(a)') 'usage: heat2d_f [--n N] [--iters I] [--checkpoint-every K] [--sleep-ms S] [--no-restart]', &
      '  --n N                 global grid is N x N (default 256, at least 3 and the rank count)', &
      '  --iters I             Jacobi iterations (default 1000)', &
      '  --checkpoint-every K  cairn_checkpoint every K iterations (default 100; 0 = never)', &
      '  --sleep-ms S          sleep S ms per iteration, to slow the run down (default 0)', &
      '  --no-restart          start from scratch even if a checkpoint exists'
  end subroutine usage

  ! Both buffers: fixed edges (never written by a sweep), zero interior, zero halos.
  subroutine initialize(u)
    real(real64), intent(out) :: u(:, 0:)
    integer :: r, global_row
    u = 0.0_real64
    do r = 1, rows
      global_row = first_row + r - 1
      if (global_row == 0) then
        u(:, r) = top_edge
      end if
      ! the other edges are 0.0, like the interior
    end do
  end subroutine initialize

  subroutine exchange_halos(u)
    real(real64), intent(inout) :: u(:, 0:)
    type(MPI_Comm) :: comm
    integer :: up, down
    comm = MPI_COMM_WORLD
    up = merge(rank - 1, MPI_PROC_NULL, rank > 0)
    down = merge(rank + 1, MPI_PROC_NULL, rank < nprocs - 1)
    ! the first owned row goes up, the lower neighbour's first row arrives in the lower halo
    call MPI_Sendrecv(u(:, 1), int(n), MPI_DOUBLE_PRECISION, up, 1, u(:, rows + 1), int(n), MPI_DOUBLE_PRECISION, &
                      down, 1, comm, MPI_STATUS_IGNORE)
    ! the last owned row goes down, the upper neighbour's last row arrives in the upper halo
    call MPI_Sendrecv(u(:, rows), int(n), MPI_DOUBLE_PRECISION, down, 2, u(:, 0), int(n), MPI_DOUBLE_PRECISION, &
                      up, 2, comm, MPI_STATUS_IGNORE)
  end subroutine exchange_halos

  ! heat2d.c's expression, 0.25 * (above + below + left + right) summed left to right, so every point is
  ! the same double in both programs.
  subroutine sweep(cur, next)
    real(real64), intent(in) :: cur(:, 0:)
    real(real64), intent(inout) :: next(:, 0:)
    integer :: r, c, global_row
    do r = 1, rows
      global_row = first_row + r - 1
      if (global_row == 0 .or. global_row == n - 1) cycle
      do c = 2, int(n) - 1
        next(c, r) = 0.25_real64 * (((cur(c, r - 1) + cur(c, r + 1)) + cur(c - 1, r)) + cur(c + 1, r))
      end do
    end do
  end subroutine sweep

  ! The grid by rows, as heat2d's (a BLOCK_ROWS distribution of n x n), and the replicated iteration
  ! count: a checkpoint can be restarted on any number of ranks, and by heat2d or heat2d.py.
  subroutine protect_state()
    type(cairn_distribution) :: by_rows, same
    by_rows = cairn_distribution(kind=CAIRN_DIST_BLOCK_ROWS, rows=n, cols=n)
    same = cairn_distribution(kind=CAIRN_DIST_REPLICATED, global_count=1)
    if (cur_is_a) then
      call cairn_protect_distributed('grid', a(:, 1:rows), by_rows)
    else
      call cairn_protect_distributed('grid', b(:, 1:rows), by_rows)
    end if
    call cairn_protect_distributed('iter', iter, same)
  end subroutine protect_state

  subroutine pause_ms(ms)
    integer(int64), intent(in) :: ms
    interface
      integer(c_int) function usleep(microseconds) bind(C, name='usleep')
        import :: c_int
        integer(c_int), value :: microseconds
      end function usleep
    end interface
    integer(c_int) :: ignored
    if (ms > 0) ignored = usleep(int(ms * 1000, c_int))
  end subroutine pause_ms

  ! Rank 0 receives every rank's rows in rank (hence row-major) order and hashes them as they come.
  function hash_global_grid(u) result(text)
    real(real64), intent(in) :: u(:, 0:)
    character(len=16) :: text
    real(real64), allocatable :: buffer(:)
    integer(int64) :: hi, lo
    type(MPI_Status) :: st
    integer :: source, received
    if (rank /= 0) then
      call MPI_Send(u(:, 1:rows), rows * int(n), MPI_DOUBLE_PRECISION, 0, 3, MPI_COMM_WORLD)
      text = ''
      return
    end if
    ! FNV-1a 64 in two 32-bit halves: Fortran has no unsigned 64-bit arithmetic.
    hi = int(z'CBF29CE4', int64)
    lo = int(z'84222325', int64)
    call fnv1a64(u(:, 1:rows), hi, lo)
    allocate(buffer(max_rows * n))
    do source = 1, nprocs - 1
      call MPI_Recv(buffer, max_rows * int(n), MPI_DOUBLE_PRECISION, source, 3, MPI_COMM_WORLD, st)
      call MPI_Get_count(st, MPI_DOUBLE_PRECISION, received)
      call fnv1a64(buffer(1:received), hi, lo)
    end do
    write(text, '(z8.8,z8.8)') hi, lo
    text = lower(text)
  end function hash_global_grid

  ! Feeds the bytes of `values` as stored in memory to the hash (hi, lo): state = (state xor byte) *
  ! 0x100000001b3 mod 2^64, where the prime is 2^40 + 0x1b3; every intermediate stays below 2^43.
  subroutine fnv1a64(values, hi, lo)
    real(real64), intent(in) :: values(..)
    integer(int64), intent(inout) :: hi, lo
    integer(int8), allocatable :: bytes(:)
    integer(int64), parameter :: mask32 = int(z'FFFFFFFF', int64), low_prime = int(z'1B3', int64)
    integer(int64) :: l, h
    integer :: i
    select rank (values)
    rank (1)
      bytes = transfer(values, [0_int8])
    rank (2)
      bytes = transfer(values, [0_int8])
    rank default
      error stop 'heat2d_f: fnv1a64 takes rows of the grid'
    end select
    do i = 1, size(bytes)
      lo = ieor(lo, iand(int(bytes(i), int64), 255_int64))
      l = lo * low_prime
      h = hi * low_prime + shiftr(l, 32) + iand(shiftl(lo, 8), mask32)
      lo = iand(l, mask32)
      hi = iand(h, mask32)
    end do
  end subroutine fnv1a64

  pure function lower(s) result(t)
    character(len=*), intent(in) :: s
    character(len=len(s)) :: t
    integer :: i
    t = s
    do i = 1, len(s)
      if (s(i:i) >= 'A' .and. s(i:i) <= 'Z') t(i:i) = achar(iachar(s(i:i)) + 32)
    end do
  end function lower

  function level_name(l) result(name)
    integer, intent(in) :: l
    character(len=4) :: name
    select case (l)
    case (CAIRN_LEVEL_L1)
      name = 'L1'
    case (CAIRN_LEVEL_L2)
      name = 'L2'
    case (CAIRN_LEVEL_L3)
      name = 'L3'
    case default
      name = 'none'
    end select
  end function level_name

  subroutine check(rc, call)
    integer, intent(in) :: rc
    character(len=*), intent(in) :: call
    if (rc /= CAIRN_SUCCESS) then
      write(error_unit, '(6a)') 'heat2d_f: ', call, ' failed: ', cairn_strerror(rc), ': ', cairn_last_error()
      flush(error_unit)
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
  end subroutine check

end program heat2d_f
