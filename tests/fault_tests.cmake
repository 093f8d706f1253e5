# Fault drills (tests/fault_*.py): results that cannot be written at the end are saved in the
# temporary directory (fault_report_test.py), and a sweep killed again and again resumes to the
# same bytes, its stale lock removed (fault_sweep_test.py). Debian's /usr/bin/python3, no packages.
foreach(name fault_report_test fault_sweep_test)
  add_test(NAME ${name} COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/${name}.py $<TARGET_FILE:precsim>)
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 300)
endforeach()
