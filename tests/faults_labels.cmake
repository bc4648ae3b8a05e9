# Read by ctest after the discovered tests of unit_tests (tests/CMakeLists.txt):
# the tests of the suites *Faults get the labels `unit` and `faults`.
foreach(test IN LISTS unit_tests_TESTS)
  if(test MATCHES "Faults\\.")
    set_tests_properties("${test}" PROPERTIES LABELS "unit;faults")
  endif()
endforeach()
