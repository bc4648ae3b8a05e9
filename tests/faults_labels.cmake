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
#    Oracle, RemoveAll and Empty.
set(pmindex_tsan_skip
    "^((PoolFile|PoolFaults|DbFaults|KvFaults|RootSlots|ContentRecord|DamageChecks|OutOfSpace|BulkLoad|Sequential|Oracle|RemoveAll|Empty)\\.|[^.]*/KvContentOverKind\\.|KvTree\\.DamagedNodesAreRefusedOrHarmless$|PoolInMemory\\.RandomImagesNeverCrash$|TwoLayerMerge\\.(OptionsAndDefaults|LeftAndRightNeighboursUnderOneParent|DeletesShrinkTheTreeAndReopenKeepsEveryKey)$|DbTest\\.(CreateOnAnExistingPath|OpenWithTheWrongExpectedKind))")
foreach(test IN LISTS unit_tests_TESTS)
  set(labels unit)
  if(test MATCHES "Faults\\.")
    list(APPEND labels faults)
  endif()
  if(test MATCHES "${pmindex_tsan_skip}")
    list(APPEND labels tsan_skip)
  endif()
  if(NOT labels STREQUAL "unit")
    set_tests_properties("${test}" PROPERTIES LABELS "${labels}")
  endif()
endforeach()
foreach(test IN LISTS scenario_tests_TESTS)
  if(test MATCHES "${pmindex_tsan_skip}")
    set_tests_properties("${test}" PROPERTIES LABELS "scenario;tsan_skip")
  endif()
endforeach()
