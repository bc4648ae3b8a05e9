# Read by ctest (TEST_INCLUDE_FILES) when the build registers one ctest
# test per gtest suite (-DPMINDEX_TEST_PER_SUITE=ON, tests/CMakeLists.txt),
# once per test binary, with these set by the include file that names it:
#   pmindex_suites_binary   the gtest binary
#   pmindex_suites_label    its label (unit, scenario, crash)
#   pmindex_suites_relabel  ON: labels per test as faults_labels.cmake gives
#                           them (unit_tests, scenario_tests)
#   pmindex_suites_timeout  seconds per gtest test
#   pmindex_suites_dir      working directory
# It lists the binary's tests (at ctest time, under ctest's environment, as
# gtest_discover_tests' PRE_TEST mode does, so PMINDEX_SCENARIO_CONFIGS
# applies) and registers one test per suite running --gtest_filter=Suite.*,
# named after the suite. A suite whose tests carry different labels (a
# tsan_skip test beside others) becomes one test per label set, named
# Suite:<extra labels> (Suite:rest for the tests with the binary's label
# only), each filtering its tests by name; a big group is cut in parts
# (below). The same tests run as with one
# ctest test per gtest test, with the same labels; a failure's output is
# gtest's for the suite, whose summary names the failed tests.
include(${CMAKE_CURRENT_LIST_DIR}/faults_labels.cmake)

if(NOT EXISTS "${pmindex_suites_binary}")
  # Not built in this build (e.g. only some test binaries were built): one
  # failing test says so, as gtest_discover_tests' error would.
  get_filename_component(pmindex_suites_name "${pmindex_suites_binary}" NAME)
  add_test("${pmindex_suites_name}_NOT_BUILT" "${CMAKE_COMMAND}" -E false)
  set_tests_properties("${pmindex_suites_name}_NOT_BUILT" PROPERTIES
                       LABELS "${pmindex_suites_label}")
  return()
endif()

execute_process(COMMAND "${pmindex_suites_binary}" --gtest_list_tests
                WORKING_DIRECTORY "${pmindex_suites_dir}"
                RESULT_VARIABLE pmindex_suites_rc
                OUTPUT_VARIABLE pmindex_suites_out
                ERROR_VARIABLE pmindex_suites_err)
if(NOT pmindex_suites_rc EQUAL 0)
  message(FATAL_ERROR "${pmindex_suites_binary} --gtest_list_tests failed "
                      "(${pmindex_suites_rc}): ${pmindex_suites_err}")
endif()

# gtest's listing: "Suite." (maybe "  # TypeParam = ...") on a line of its
# own, then "  Test" (maybe "  # GetParam() = ...") per test. Lines are
# split by hand: a ';' in a parameter's description would split a CMake list.
string(REPLACE ";" "," pmindex_suites_out "${pmindex_suites_out}")
string(REPLACE "\n" ";" pmindex_suites_lines "${pmindex_suites_out}")
set(pmindex_suites_order "")
set(pmindex_suites_suite "")
foreach(line IN LISTS pmindex_suites_lines)
  string(REGEX REPLACE "  #.*$" "" line "${line}")
  if(line MATCHES "^([^ ][^ ]*)\\.$")
    set(pmindex_suites_suite "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^  ([^ ]+)$" AND NOT pmindex_suites_suite STREQUAL "")
    set(name "${CMAKE_MATCH_1}")
    if(name MATCHES "^DISABLED_" OR pmindex_suites_suite MATCHES "^DISABLED_")
      continue()  # never run, as with gtest_discover_tests
    endif()
    set(test "${pmindex_suites_suite}.${name}")
    if(pmindex_suites_relabel)
      pmindex_test_labels("${test}" "${pmindex_suites_label}" labels)
    else()
      set(labels "${pmindex_suites_label}")
    endif()
    list(REMOVE_AT labels 0)
    string(REPLACE ";" "+" extra "${labels}")
    if(extra STREQUAL "")
      set(extra rest)
    endif()
    # Groups are keyed by binary, suite and extra labels (the variables of
    # every binary's include share ctest's scope).
    string(MD5 key "${pmindex_suites_binary}:${pmindex_suites_suite}")
    if(NOT DEFINED pmindex_suites_extras_${key})
      list(APPEND pmindex_suites_order "${pmindex_suites_suite}")
      set(pmindex_suites_extras_${key} "")
    endif()
    list(FIND pmindex_suites_extras_${key} "${extra}" at)  # (no IN_LIST: ctest's policies are old)
    if(at EQUAL -1)
      list(APPEND pmindex_suites_extras_${key} "${extra}")
      set(pmindex_suites_tests_${key}_${extra} "")
    endif()
    list(APPEND pmindex_suites_tests_${key}_${extra} "${test}")
  endif()
endforeach()

# A group of more than pmindex_suites_max tests is cut into parts of
# consecutive tests (Suite#1of3, ...), so that the shared scenarios (one
# suite over every index config) still spread over ctest -j.
if(NOT pmindex_suites_max)
  set(pmindex_suites_max 20)
endif()
function(pmindex_suites_add name filter n)
  set(labels "${pmindex_suites_label}")
  if(NOT extra STREQUAL "rest")
    string(REPLACE "+" ";" more "${extra}")
    list(APPEND labels ${more})
  endif()
  # The hang guard of one test for each test of the group, at most 30 min.
  math(EXPR timeout "${pmindex_suites_timeout} * ${n}")
  if(timeout GREATER 1800)
    set(timeout 1800)
  endif()
  add_test("${name}" "${pmindex_suites_binary}" "--gtest_filter=${filter}")
  # COST: ctest -j starts the biggest groups first (no timing history on a
  # clean build), so that none is left alone at the end of the run.
  set_tests_properties("${name}" PROPERTIES LABELS "${labels}" TIMEOUT ${timeout} COST ${n}
                       WORKING_DIRECTORY "${pmindex_suites_dir}")
endfunction()

foreach(suite IN LISTS pmindex_suites_order)
  string(MD5 key "${pmindex_suites_binary}:${suite}")
  list(LENGTH pmindex_suites_extras_${key} groups)
  foreach(extra IN LISTS pmindex_suites_extras_${key})
    set(tests ${pmindex_suites_tests_${key}_${extra}})
    list(LENGTH tests n)
    if(groups EQUAL 1)
      set(name "${suite}")
    else()
      set(name "${suite}:${extra}")
    endif()
    if(n LESS_EQUAL pmindex_suites_max)
      if(groups EQUAL 1)
        pmindex_suites_add("${name}" "${suite}.*" ${n})
      else()
        string(REPLACE ";" ":" filter "${tests}")
        pmindex_suites_add("${name}" "${filter}" ${n})
      endif()
      continue()
    endif()
    # parts parts of n / parts tests, the first n % parts one more.
    math(EXPR parts "(${n} + ${pmindex_suites_max} - 1) / ${pmindex_suites_max}")
    math(EXPR base "${n} / ${parts}")
    math(EXPR more "${n} % ${parts}")
    set(first 0)
    foreach(part RANGE 1 ${parts})
      set(size ${base})
      if(part LESS_EQUAL more)
        math(EXPR size "${size} + 1")
      endif()
      list(SUBLIST tests ${first} ${size} chunk)
      string(REPLACE ";" ":" filter "${chunk}")
      pmindex_suites_add("${name}#${part}of${parts}" "${filter}" ${size})
      math(EXPR first "${first} + ${size}")
    endforeach()
  endforeach()
endforeach()
