# ctest pmcrash_mutate_covers_all: every persistent index pmcrash knows
# (test-only fixtures aside) has a pmcrash_<index>_mutate test, i.e. is in
# PMCRASH_MUTATE_INDEXES (crashsim/CMakeLists.txt).
#   cmake -DPMCRASH=<pmcrash> -DINDEXES=<a;b;...> -P mutate_covers_all.cmake
execute_process(COMMAND ${PMCRASH} --list OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pmcrash --list failed (${rc})")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(n 0)
foreach(line ${lines})
  if(line STREQUAL "" OR line MATCHES "test-only")
    continue()
  endif()
  math(EXPR n "${n} + 1")
  list(FIND INDEXES "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "index '${line}' has no pmcrash_${line}_mutate test: add it to "
                        "PMCRASH_MUTATE_INDEXES in crashsim/CMakeLists.txt")
  endif()
endforeach()
if(n EQUAL 0)
  message(FATAL_ERROR "pmcrash --list printed no persistent index")
endif()
message(STATUS "${n} persistent indexes, each with a mutate test")
