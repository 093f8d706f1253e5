# precsim sweep end to end (tests/sweep_test.py): the local executor, kill-and-resume, MPI ranks
# (mpirun --oversubscribe -n 3; skipped, exit 77, where MPI is absent) and refused sweep files.
foreach(mode local resume mpi refuse)
  add_test(NAME sweep_${mode}_test
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/sweep_test.py ${mode} $<TARGET_FILE:precsim>
                   ${PROJECT_SOURCE_DIR}/reports/schema/precsim.report.schema.json)
  set_tests_properties(sweep_${mode}_test PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
if(PRECSIM_SANITIZE)
  # LeakSanitizer counts what OpenMPI's own components still hold at exit (allocated from modules it
  # has unloaded by then, so no suppression by library name matches) and sets every rank's exit
  # status to 1. precsim's code under MPI is the sweep code the local and resume tests run sanitized.
  set_tests_properties(sweep_mpi_test PROPERTIES ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endif()
