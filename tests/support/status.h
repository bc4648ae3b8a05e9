// Assertions on Status and Result<T> that print the status on failure.
//
//   PMINDEX_ASSERT_OK(expr);                 expr is a Status
//   PMINDEX_EXPECT_OK(expr);
//   PMINDEX_ASSERT_OK_AND_ASSIGN(lhs, expr); expr is a Result<T>; its value
//                                            is moved into lhs (a
//                                            declaration or a variable)
// The ASSERT forms return from the enclosing function, which must return
// void (gtest's rule).
#pragma once

#include <gtest/gtest.h>

#include <utility>

#include "pmindex/status.h"

#define PMINDEX_ASSERT_OK(expr)                             \
  do {                                                      \
    ::pmindex::Status _s = (expr);                          \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s.ToString(); \
  } while (0)

#define PMINDEX_EXPECT_OK(expr)                             \
  do {                                                      \
    ::pmindex::Status _s = (expr);                          \
    EXPECT_TRUE(_s.ok()) << #expr << ": " << _s.ToString(); \
  } while (0)

#define PMINDEX_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  PMINDEX_ASSERT_OK_AND_ASSIGN_IMPL(PMINDEX_TEST_CONCAT(_res_, __LINE__), lhs, expr)
#define PMINDEX_TEST_CONCAT2(a, b) a##b
#define PMINDEX_TEST_CONCAT(a, b) PMINDEX_TEST_CONCAT2(a, b)
#define PMINDEX_ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr)            \
  auto tmp = (expr);                                                 \
  ASSERT_TRUE(tmp.ok()) << #expr << ": " << tmp.status().ToString(); \
  lhs = std::move(tmp.value())
