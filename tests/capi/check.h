// The failure counter and CHECK of the C++ tests that report "ok" or
// "FAIL ..." lines (flows_test.cpp, s3_test.cpp).
#pragma once

#include <daqiri/daqiri.h>

#include <cstdio>

namespace {

int failures = 0;
int checks = 0;

#define CHECK(cond)                                                                                 \
  do {                                                                                              \
    ++checks;                                                                                       \
    if (!(cond)) {                                                                                  \
      ++failures;                                                                                   \
      std::printf("FAIL %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, daqiri::last_error()); \
    }                                                                                               \
  } while (0)

}  // namespace
