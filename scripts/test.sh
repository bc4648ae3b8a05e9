#!/usr/bin/env bash
# The whole test suite, as CI runs it (README: "Run the tests").
#   0. the format of the C++ lines changed since .clang-format-since
#      (scripts/check-format.sh; --fix applies it), and no function of
#      src/ or server/ over 80 lines outside the checker's commented
#      allow-list (scripts/check-function-length.py, about a second);
#   0a. Clang's thread-safety analysis: every source file of src/ and
#      server/ compiled with clang++ -fsyntax-only -Wthread-safety, its
#      diagnostics as errors (scripts/check-thread-safety.sh, build dir
#      build/clang-tsa; nothing is built; 80 CPU-seconds on 2026-11-28);
#   1. release build (test sources at -O1, the libraries at -O3): every
#      unit, scenario and crash-simulator test, the
#      pmcrash mutation runs of PMCRASH_MUTATE_CI_INDEXES included;
#   2. ASan+UBSan build (the traced library only, PMINDEX_TRACED_ONLY;
#      UBSan instruments the libraries and the server, ASan everything;
#      the test sources compile without UBSan, tests/CMakeLists.txt):
#      unit, scenario, CLI and crash-simulator tests,
#      pmcrash over every index included (recovery from crash images reads
#      the most hostile bytes; a smaller image budget per crash point, 2,
#      20 ops per workload instead of 40, and the workloads mixed (inserts
#      and deletes), delete (merges) and recovery: insert, seq, bulk and
#      the eadr and tear modes run in release);
#      the CLI test once (pmpool_cli), its per-kind copies (label
#      cli_per_kind) in release only,
#      and the shared scenarios over the first test config of each index
#      only (PMINDEX_SCENARIO_CONFIGS=first; release and TSan run them
#      all), to keep the whole run within 30 minutes on 2 cores;
#   2a. the Python package: `pip install .` (pyproject.toml) into a fresh
#      virtual environment and its pytest suite (scripts/test-python.sh);
#   3. TSan build: every unit and scenario test (not a name filter, so no
#      threaded test is missed), except suites that run one thread and
#      start none, to keep the whole run within 30 minutes (release and
#      ASan run them): the pool-damage suites PoolFile, RootSlots,
#      ContentRecord, DamageChecks, KvContentOverKind and KvTree's
#      damaged-node test, and the file-system fault sweeps PoolFaults,
#      DbFaults and KvFaults (no thread in their files), three slow single-threaded
#      tests (PoolInMemory.RandomImagesNeverCrash, and DbTest's
#      CreateOnAnExistingPath... and OpenWithTheWrongExpectedKind..., 20 s
#      each under TSan) and the single-threaded shared scenarios
#      OutOfSpace, BulkLoad, Sequential, Oracle, RemoveAll and Empty (the
#      library starts threads only in pm_leaf_tree's recovery, which
#      Reopen and LeafTreeRecovery run under TSan, and in nobtree's
#      migration coordinator, which its scenario configs run); they carry
#      the ctest label tsan_skip (tests/faults_labels.cmake), and
#      Reopen.AfterGrowth (one thread filling a segment). The
#      server's unit tests (server_tests: protocols and the Asio server,
#      several threads, over a test-only map store, and the Store
#      contract over KvBackedStore too) run there as well; the
#      server_protocol test (the pmserver binary, label server) runs in
#      release and ASan+UBSan.
# The sanitizer builds register one ctest test per gtest suite (at most 20
# gtest tests each; -DPMINDEX_TEST_PER_SUITE=ON, tests/gtest_suites.cmake):
# the same tests with the same labels, in a few hundred processes instead
# of one per gtest test (about 1,100 under ASan, 1,029 under TSan; a TSan
# process costs about 0.03 CPU-s to start, more than many tests take);
# release keeps one ctest test per gtest test.
# pmcrash checks its crash images in memory made once per run
# (docs/crash-testing.md "Checks on each image").
# Every build compiles with -Werror (CMake option PMINDEX_WERROR).
# Builds go to build/<type>. Safe to run twice (incremental).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${PMINDEX_JOBS:-$(nproc)}

scripts/deps.sh build

configure() {  # dir, build type, extra cmake args... (warnings are errors here)
  local dir=$1 type=$2
  shift 2
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DPMINDEX_WERROR=ON "$@" >/dev/null
}

start=$(date +%s)
step() { echo "== $* ($(( $(date +%s) - start ))s)"; }

step "format of the changed lines, and function lengths"
scripts/check-format.sh
python3 scripts/check-function-length.py

step "Clang thread-safety analysis"
scripts/check-thread-safety.sh build/clang-tsa

step "release build"
configure build/release Release
ninja -C build/release -j "$jobs"
step "release tests"
(cd build/release && ctest -j "$jobs" --output-on-failure)

step "Python package and its tests"
# pip install . into a fresh virtual environment, then pytest python/tests
# (about 150 CPU-seconds, most of it compiling the library position-independent).
scripts/test-python.sh build/python

step "ASan+UBSan build"
configure build/asan Asan -DPMINDEX_TRACED_ONLY=ON -DPMINDEX_BUILD_BENCH=OFF -DPMINDEX_TEST_PER_SUITE=ON -DPMCRASH_CTEST_BUDGET=2 -DPMCRASH_CTEST_OPS=20 -DPMCRASH_CTEST_MUTATE=OFF \
  "-DPMCRASH_CTEST_WORKLOADS=mixed;delete;recovery" -DPMCRASH_CTEST_EADR=OFF -DPMCRASH_CTEST_TEAR=OFF \
  "-DPMCRASH_MUTATE_CI_INDEXES=" -DPMCRASH_CTEST_KV_MUTATE=OFF -DPMCRASH_CTEST_MERGE_MUTATE=OFF
ninja -C build/asan -j "$jobs"
step "ASan+UBSan tests"
(cd build/asan && PMINDEX_SCENARIO_CONFIGS=first ctest -j "$jobs" --output-on-failure -LE cli_per_kind)

step "TSan build"
configure build/tsan Tsan -DPMINDEX_BUILD_BENCH=OFF -DPMINDEX_BUILD_CRASHSIM=OFF -DPMINDEX_BUILD_TOOLS=OFF \
  -DPMINDEX_TEST_PER_SUITE=ON
ninja -C build/tsan -j "$jobs" unit_tests scenario_tests server_tests
step "TSan tests"
(cd build/tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
   ctest -j "$jobs" --output-on-failure -L 'unit|scenario' -LE tsan_skip)

step "all tests passed"
