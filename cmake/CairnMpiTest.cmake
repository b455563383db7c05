# cairn_add_mpi_test(NAME name NP n COMMAND cmd... [LABELS l...] [TIMEOUT s])
# Runs a test under the site's MPI launcher: srun inside a Slurm allocation, else mpirun
# (with --oversubscribe, since tests put more ranks than cores on one machine).
function(cairn_add_mpi_test)
  cmake_parse_arguments(T "" "NAME;NP;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(DEFINED ENV{SLURM_JOB_ID} AND NOT DEFINED ENV{CAIRN_TEST_NO_SRUN})
    set(launch srun -n ${T_NP})
  else()
    set(launch ${MPIEXEC_EXECUTABLE} --oversubscribe ${MPIEXEC_NUMPROC_FLAG} ${T_NP})
  endif()
  add_test(NAME ${T_NAME} COMMAND ${launch} ${T_COMMAND})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endfunction()
