# Read by ctest after the discovered tests of unit_tests and scenario_tests
# (tests/CMakeLists.txt); gtest_discover_tests cannot set list-valued
# labels itself.
#  - the suites *Faults: labels `unit` and `faults`;
#  - `tsan_skip`, the tests scripts/test.sh's TSan run leaves out because
#    they run one thread and start none (release and ASan+UBSan run them):
#    the pool-damage suites PoolFile, RootSlots, ContentRecord,
#    DamageChecks, KvContentOverKind and KvTree's damaged-node test, the
#    fault sweeps PoolFaults, DbFaults and KvFaults, three slow
#    single-threaded tests, the single-threaded TwoLayerMerge tests (their
#    concurrent one stays), and the
#    single-threaded shared scenarios OutOfSpace, BulkLoad, Sequential,
#    Oracle, RemoveAll and Empty, and Reopen.AfterGrowth (one thread
#    filling a 4 MiB segment: 66 of TSan's 318 test-seconds on 2026-11-28;
#    the other Reopen tests run the recovery threads under TSan).
set(pmindex_tsan_skip
    "^((PoolFile|PoolFaults|DbFaults|KvFaults|RootSlots|ContentRecord|DamageChecks|OutOfSpace|BulkLoad|Sequential|Oracle|RemoveAll|Empty)\\.|[^.]*/KvContentOverKind\\.|KvTree\\.DamagedNodesAreRefusedOrHarmless$|PoolInMemory\\.RandomImagesNeverCrash$|Reopen\\.AfterGrowth/|TwoLayerMerge\\.(OptionsAndDefaults|LeftAndRightNeighboursUnderOneParent|DeletesShrinkTheTreeAndReopenKeepsEveryKey)$|DbTest\\.(CreateOnAnExistingPath|OpenWithTheWrongExpectedKind))")
# pmindex_test_labels(<test> <label of its binary> <out>): the labels of
# one gtest test (also used by gtest_suites.cmake, which groups tests with
# the same labels per suite).
function(pmindex_test_labels test base out)
  set(labels ${base})
  if(base STREQUAL "unit" AND test MATCHES "Faults\\.")
    list(APPEND labels faults)
  endif()
  if(base MATCHES "^(unit|scenario)$" AND test MATCHES "${pmindex_tsan_skip}")
    list(APPEND labels tsan_skip)
  endif()
  set(${out} "${labels}" PARENT_SCOPE)
endfunction()
foreach(test IN LISTS unit_tests_TESTS)
  pmindex_test_labels("${test}" unit labels)
  if(NOT labels STREQUAL "unit")
    set_tests_properties("${test}" PROPERTIES LABELS "${labels}")
  endif()
endforeach()
foreach(test IN LISTS scenario_tests_TESTS)
  pmindex_test_labels("${test}" scenario labels)
  if(NOT labels STREQUAL "scenario")
    set_tests_properties("${test}" PROPERTIES LABELS "${labels}")
  endif()
endforeach()
