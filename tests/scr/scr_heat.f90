! scr_heat_f: the 1-D heat ring of scr_heat.c in Fortran, checkpointed through SCR's Fortran interface
! as SCR's own test_ckpt.F90 does it (INCLUDE 'scrf.h', SCR_ROUTE_FILE, OPEN/WRITE/CLOSE of the routed
! name). Nothing here knows about cairn: it is built against scrf.h and linked with -lscr.
!
!   scr_heat_f [cells [steps]]
!
! Checkpoints: every SCR_NEED_CHECKPOINT, a dataset "ckpt_<step>" holding "ckpt_<step>/rank_<r>.ckpt"
! (unformatted stream: step, cells, the cells). Rank 0 prints "result <16 hex digits>" at the end.
program scr_heat_f
  implicit none
  include 'mpif.h'
  include 'scrf.h'

  integer :: ierr, rank, ranks, left, right, flag, valid, ios, unit_no
  integer :: cells = 4096, steps = 60, step, i, n, saved_step
  character(len=32) :: arg
  character(len=scr_max_filename) :: ckptname, fname, fname_scr
  double precision, allocatable :: u(:), v(:), all(:)
  integer(kind=8) :: h

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, ranks, ierr)
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) cells
  end if
  if (command_argument_count() >= 2) then
    call get_command_argument(2, arg)
    read (arg, *) steps
  end if

  call SCR_INIT(ierr)
  if (ierr /= SCR_SUCCESS) call die('SCR_INIT failed')
  allocate (u(0:cells + 1), v(0:cells + 1))
  do i = 1, cells
    u(i) = dble(mod(rank * cells + i - 1, 97)) / 97.0d0
  end do
  step = 0

  ! Restart from the newest checkpoint SCR offers; an unreadable one is rejected and the next tried.
  call SCR_HAVE_RESTART(flag, ckptname, ierr)
  do while (flag == 1)
    call SCR_START_RESTART(ckptname, ierr)
    write (fname, '(A,A,I0,A)') trim(ckptname), '/rank_', rank, '.ckpt'
    call SCR_ROUTE_FILE(fname, fname_scr, ierr)
    valid = 0
    if (ierr == SCR_SUCCESS) then
      open (newunit=unit_no, file=fname_scr, form='unformatted', access='stream', action='read', &
            status='old', iostat=ios)
      if (ios == 0) then
        read (unit_no, iostat=ios) saved_step, n
        if (ios == 0 .and. n == cells) read (unit_no, iostat=ios) u(1:cells)
        if (ios == 0 .and. n == cells) valid = 1
        close (unit_no)
      end if
    end if
    call SCR_COMPLETE_RESTART(valid, ierr)
    if (ierr == SCR_SUCCESS) then
      step = saved_step
      if (rank == 0) print '(A,A,A,I0)', 'scr_heat_f: restarted from ', trim(ckptname), ' at step ', step
      exit
    end if
    call SCR_HAVE_RESTART(flag, ckptname, ierr)
  end do

  left = mod(rank + ranks - 1, ranks)
  right = mod(rank + 1, ranks)
  do while (step < steps)
    call MPI_SENDRECV(u(1), 1, MPI_DOUBLE_PRECISION, left, 0, u(cells + 1), 1, MPI_DOUBLE_PRECISION, right, 0, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_SENDRECV(u(cells), 1, MPI_DOUBLE_PRECISION, right, 1, u(0), 1, MPI_DOUBLE_PRECISION, left, 1, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    do i = 1, cells
      v(i) = u(i) + 0.25d0 * (u(i - 1) - 2.0d0 * u(i) + u(i + 1))
    end do
    u(1:cells) = v(1:cells)
    step = step + 1

    call SCR_NEED_CHECKPOINT(flag, ierr)
    if (flag == 1 .and. step < steps) then
      write (ckptname, '(A,I5.5)') 'ckpt_', step
      call SCR_START_OUTPUT(ckptname, SCR_FLAG_CHECKPOINT, ierr)
      write (fname, '(A,A,I0,A)') trim(ckptname), '/rank_', rank, '.ckpt'
      call SCR_ROUTE_FILE(fname, fname_scr, ierr)
      valid = 0
      open (newunit=unit_no, file=fname_scr, form='unformatted', access='stream', action='write', &
            status='replace', iostat=ios)
      if (ios == 0) then
        write (unit_no, iostat=ios) step, cells
        if (ios == 0) write (unit_no, iostat=ios) u(1:cells)
        if (ios == 0) valid = 1
        close (unit_no)
      end if
      call SCR_COMPLETE_OUTPUT(valid, ierr)
      if (ierr /= SCR_SUCCESS) call die('SCR_COMPLETE_OUTPUT: the checkpoint was not kept')
    end if
    call SCR_SHOULD_EXIT(flag, ierr)
    if (flag == 1) exit
  end do

  if (step == steps) then
    allocate (all(cells * ranks))
    call MPI_GATHER(u(1), cells, MPI_DOUBLE_PRECISION, all, cells, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
    if (rank == 0) then
      h = 0
      do i = 1, cells * ranks
        h = ieor(ishftc(h, 5), transfer(all(i), h))
      end do
      print '(A,Z16.16)', 'result ', h
    end if
  end if
  call SCR_FINALIZE(ierr)
  call MPI_FINALIZE(ierr)

contains

  subroutine die(what)
    character(len=*), intent(in) :: what
    integer :: e
    print '(A,I0,A,A)', 'scr_heat_f: rank ', rank, ': ', what
    call MPI_ABORT(MPI_COMM_WORLD, 1, e)
  end subroutine die

end program scr_heat_f
