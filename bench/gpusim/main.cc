// geogate-gpusim: an OpenAI-compatible GPU inference backend simulator for
// the demo, the integration tests and the benchmarks. See README.md.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "bench/gpusim/control.h"
#include "bench/gpusim/options.h"
#include "bench/gpusim/sim_server.h"

int main(int argc, char** argv) {
  std::string error;
  bool help = false;
  const std::optional<gpusim::Options> options = gpusim::parse_options(argc, argv, error, help);
  if (!options) {
    std::fputs(error.c_str(), help ? stdout : stderr);
    if (!help) std::fputs("\n", stderr);
    return help ? 0 : 2;
  }
  // A client that vanishes mid-write must be an error code, not a signal.
  std::signal(SIGPIPE, SIG_IGN);

  boost::asio::io_context io(1);
  gpusim::SimServer sim(*options);
  if (!sim.bind(error)) {
    std::fprintf(stderr, "gpusim: %s\n", error.c_str());
    return 1;
  }
  gpusim::ControlServer control(io, sim);
  if (options->control && !control.bind(*options->control, error)) {
    std::fprintf(stderr, "gpusim: %s\n", error.c_str());
    return 1;
  }
  if (!options->port_file.empty()) {
    // Written to a temporary name and renamed, so a reader never sees it half-done.
    const std::string tmp = options->port_file + ".tmp";
    std::ofstream(tmp) << sim.port() << "\n";
    if (std::rename(tmp.c_str(), options->port_file.c_str()) != 0) {
      std::fprintf(stderr, "gpusim: cannot write %s\n", options->port_file.c_str());
      return 1;
    }
  }

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([](const boost::system::error_code& ec, int) {
    if (ec) return;
    // Exit at once without unwinding: the simulator holds nothing worth
    // flushing, and tearing down worker threads mid-stream only adds
    // shutdown-order hazards.
    std::fflush(stdout);
    std::_Exit(0);
  });

  sim.start();
  if (options->control) control.start();
  std::printf("listening on %s\n", sim.bound_address().c_str());
  if (options->control) std::printf("control on %s\n", control.bound_address().c_str());
  std::fflush(stdout);
  io.run();
  return 0;
}
