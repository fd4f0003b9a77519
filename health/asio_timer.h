// The production TimerFactory: one-shot timers on an io_context's
// steady_timer. The only place in health/ that wraps real timers; callbacks
// run on the thread that runs the io_context.
#pragma once

#include <boost/asio/io_context.hpp>

#include "health/time_source.h"

namespace geogate::health {

class AsioTimerFactory final : public TimerFactory {
 public:
  explicit AsioTimerFactory(boost::asio::io_context& io) : io_(io) {}

  // health::TimerFactory
  TimerPtr create(std::function<void()> cb) override;

 private:
  boost::asio::io_context& io_;
};

}  // namespace geogate::health
