#include "proxy/runtime_slot.h"

#include "proxy/runtime.h"

namespace geogate::proxy {

void RuntimeSlot::Publish(RuntimeConstPtr runtime) {
  const uint64_t generation = runtime->generation;
  // The runtime first: a reader that sees the new generation then loads a
  // runtime at least that new.
  {
    std::lock_guard<std::mutex> lock(mu_);
    runtime_ = std::move(runtime);
  }
  generation_.store(generation, std::memory_order_release);
}

RuntimeConstPtr RuntimeSlot::Load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runtime_;
}

bool LocalRuntime::Adopt(RuntimeConstPtr runtime) {
  if (!runtime || (held_ && generation_ >= runtime->generation)) return false;
  generation_ = runtime->generation;
  held_ = std::make_shared<const RuntimeConstPtr>(std::move(runtime));
  return true;
}

bool LocalRuntime::Refresh() {
  if (held_ && slot_.generation() == generation_) return false;
  return Adopt(slot_.Load());
}

}  // namespace geogate::proxy
