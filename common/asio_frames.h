// Asio's coroutine frames on the block cache (common/block_cache.h).
//
// Every `co_await` of an Asio operation and every call of a coroutine
// allocates a frame (96 to 1020 bytes here), which Asio takes from a
// per-thread cache of BOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE slots. That
// cache is first fit over the slots, and a miss frees a cached block: a
// 96-byte frame takes a cached 960-byte block, the next 960-byte frame
// misses and throws away another. With a worker interleaving 64 requests
// it missed for nearly every frame (5.5 mallocs per plain proxied request,
// all of them frames; perf uprobe on malloc, wrk -c64). The block cache
// serves each frame from the free list of its size class instead.
//
// This specializes Asio's allocation for the awaitable-frame purpose
// (thread_info_base::allocate/deallocate<awaitable_frame_tag>, the only
// callers being awaitable_frame_base's operator new and delete). An
// explicit specialization must be seen before the first use in every
// translation unit of a program, or frames allocated by one definition
// would be freed by the other: the top-level CMakeLists.txt includes this
// header into every translation unit (-include), ahead of any Asio header.
// Checked against Boost 1.81 (Debian 12) only: any other Boost version is a
// build error (below), so the hook can never silently stop working.
#pragma once

#include <boost/version.hpp>

#if BOOST_VERSION == 108100

// The A/B of bench/ab builds the gateway once with GEOGATE_AB_NO_ASIO_FRAMES
// defined (in every translation unit): frames then come from Asio's own
// recycling cache, as without this header.
#ifndef GEOGATE_AB_NO_ASIO_FRAMES

#include <cstddef>

#include <boost/asio/detail/thread_info_base.hpp>

#include "common/block_cache.h"

namespace boost::asio::detail {

template <>
inline void* thread_info_base::allocate<thread_info_base::awaitable_frame_tag>(awaitable_frame_tag,
                                                                               thread_info_base*,
                                                                               std::size_t size,
                                                                               std::size_t align) {
  // Frames are always allocated with the default alignment, which operator
  // new (under the block cache) gives.
  static_assert(BOOST_ASIO_DEFAULT_ALIGN <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  if (align > BOOST_ASIO_DEFAULT_ALIGN) throw std::bad_alloc();
  return geogate::common::block_cache::Allocate(size);
}

template <>
inline void thread_info_base::deallocate<thread_info_base::awaitable_frame_tag>(awaitable_frame_tag,
                                                                                thread_info_base*,
                                                                                void* pointer,
                                                                                std::size_t size) {
  geogate::common::block_cache::Deallocate(pointer, size);
}

}  // namespace boost::asio::detail

#endif  // GEOGATE_AB_NO_ASIO_FRAMES

#else

// Asio's thread_info_base (its tags, the signatures of allocate and
// deallocate, and that awaitable frames are its only users of the tag) was
// read for Boost 1.81 only. Read it again for the new version, then widen
// the version check above.
#error "common/asio_frames.h supports only Boost 1.81 (see the comment above this line)"

#endif
