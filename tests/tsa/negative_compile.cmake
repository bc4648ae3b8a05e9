# ctest thread_safety_negative: Clang's thread-safety analysis accepts
# guarded_access.cc when every lock is used correctly (case 0) and refuses
# each broken case with the diagnostic expected for it.
#   cmake -DCLANGXX=clang++ -DSRC=guarded_access.cc -DINCLUDE=<repo>/src -P negative_compile.cmake
set(expect_1 "writing variable 'balance_' requires holding mutex 'mu_' exclusively")
set(expect_2 "calling function 'WithdrawLocked' requires holding mutex 'mu_' exclusively")
set(expect_3 "writing variable 'id_' requires holding shared mutex 'names_mu_' exclusively")
set(expect_4 "reading variable 'balance_' requires holding mutex 'mu_'")

foreach(case 0 1 2 3 4)
  execute_process(
    COMMAND ${CLANGXX} -std=c++20 -fsyntax-only -Wthread-safety -Werror=thread-safety
            -I${INCLUDE} -DPMINDEX_TSA_CASE=${case} ${SRC}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(case EQUAL 0)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "case 0 (locks used correctly) was refused:\n${out}")
    endif()
    continue()
  endif()
  if(rc EQUAL 0)
    message(FATAL_ERROR "case ${case} compiled: the analysis missed \"${expect_${case}}\"")
  endif()
  string(FIND "${out}" "${expect_${case}}" at)
  if(at EQUAL -1 OR NOT out MATCHES "1 error generated")
    message(FATAL_ERROR "case ${case}: expected exactly the error \"${expect_${case}}\", "
                        "got:\n${out}")
  endif()
  message(STATUS "case ${case}: refused as expected")
endforeach()
