// A stand-in for Boost 1.83's boost/version.hpp, for the CTest
// common/bulk_queue_rejects_an_unchecked_boost (tests/unit/common/CMakeLists.txt).
#pragma once
#define BOOST_VERSION 108300
#define BOOST_LIB_VERSION "1_83"
