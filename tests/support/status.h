// Assertions on Status and Result<T> that print the status on failure.
//
//   PMINDEX_ASSERT_OK(expr);                 expr is a Status or a Result<T>
//   PMINDEX_EXPECT_OK(expr);
//   PMINDEX_ASSERT_OK_AND_ASSIGN(lhs, expr); expr is a Result<T>; its value
//                                            is moved into lhs (a
//                                            declaration or a variable)
// ASSERT_OK and EXPECT_OK evaluate expr once and, like gtest's own
// assertions, take a streamed message: PMINDEX_ASSERT_OK(s) << "key " << k;
// A Result passed by name is only read (its value stays for the test).
// The ASSERT forms return from the enclosing function, which must return
// void (gtest's rule).
#pragma once

#include <gtest/gtest.h>

#include <utility>

#include "pmindex/status.h"

namespace pmindex::test_support {

inline const Status& StatusOf(const Status& s) { return s; }
template <class T>
const Status& StatusOf(const Result<T>& r) {
  return r.status();
}

// gtest predicate-format: success iff `value` is OK; the failure names the
// expression and the status it carries.
template <class T>
::testing::AssertionResult IsOk(const char* expr_text, const T& value) {
  const Status& s = StatusOf(value);
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << expr_text << ": " << s.ToString();
}

}  // namespace pmindex::test_support

#define PMINDEX_ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::pmindex::test_support::IsOk, expr)
#define PMINDEX_EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::pmindex::test_support::IsOk, expr)

#define PMINDEX_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  PMINDEX_ASSERT_OK_AND_ASSIGN_IMPL(PMINDEX_TEST_CONCAT(_res_, __LINE__), lhs, expr)
#define PMINDEX_TEST_CONCAT2(a, b) a##b
#define PMINDEX_TEST_CONCAT(a, b) PMINDEX_TEST_CONCAT2(a, b)
#define PMINDEX_ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                      \
  PMINDEX_ASSERT_OK(tmp);                                 \
  lhs = std::move(tmp.value())
