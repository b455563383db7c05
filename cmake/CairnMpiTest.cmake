# CAIRN_TEST_MPIRUN_ARGS: launcher options the tests put before the ranks (space-separated; the
# scripts get them as CAIRN_MPIRUN_ARGS). Tests put more ranks than cores on one machine: Open MPI's
# mpirun needs --oversubscribe for that, MPICH's hydra does it anyway and rejects the option. The
# default follows `$MPIEXEC_EXECUTABLE --version`; set the variable to override it.
if(NOT DEFINED CACHE{CAIRN_TEST_MPIRUN_ARGS})
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _cairn_mpiexec_version
                  ERROR_VARIABLE _cairn_mpiexec_version TIMEOUT 20 RESULT_VARIABLE _cairn_rc)
  if(_cairn_mpiexec_version MATCHES "Open MPI|OpenRTE|open-mpi")
    set(_cairn_args "--oversubscribe")
  else()
    set(_cairn_args "")
  endif()
  set(CAIRN_TEST_MPIRUN_ARGS "${_cairn_args}" CACHE STRING
      "Options for MPIEXEC_EXECUTABLE in the tests (--oversubscribe for Open MPI, empty for MPICH)")
  message(STATUS "MPI launcher for tests: ${MPIEXEC_EXECUTABLE} ${CAIRN_TEST_MPIRUN_ARGS}")
endif()
separate_arguments(CAIRN_TEST_MPIRUN_ARGV UNIX_COMMAND "${CAIRN_TEST_MPIRUN_ARGS}")

# CAIRN_TEST_MPI_ENV: the environment every test that starts MPI ranks gets (a CMake list, for the
# ENVIRONMENT property). The tests run as root, which Open MPI refuses without the first two.
# OMPI_MCA_pml=ob1 names the point-to-point layer Open MPI picks here anyway, so that MPI_Init does
# not open the cm layer: its PSM2 component calls setenv() on the main thread while the PMIx thread
# may be inside getenv() (Open MPI 4.1's model callback), which crashed a rank in MPI_Init once in
# about forty runs of the suite on a loaded two-core machine (docs/launcher.md, "Open MPI 4.1 and
# MPI_Init"). MPICH ignores all three.
set(CAIRN_TEST_MPI_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_pml=ob1")

# cairn_add_mpi_test(NAME name NP n COMMAND cmd... [LABELS l...] [TIMEOUT s])
# Runs a test under the site's MPI launcher: srun inside a Slurm allocation, else MPIEXEC_EXECUTABLE
# with CAIRN_TEST_MPIRUN_ARGS.
function(cairn_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;NP;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(DEFINED ENV{SLURM_JOB_ID} AND NOT DEFINED ENV{CAIRN_TEST_NO_SRUN})
    set(launch srun -n ${T_NP})
  else()
    set(launch ${MPIEXEC_EXECUTABLE} ${CAIRN_TEST_MPIRUN_ARGV} ${MPIEXEC_NUMPROC_FLAG} ${T_NP})
  endif()
  add_test(NAME ${T_NAME} COMMAND ${launch} ${T_COMMAND})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "${CAIRN_TEST_MPI_ENV};OMPI_MCA_rmaps_base_oversubscribe=1")
endfunction()
