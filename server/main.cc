// geogate: a geo-aware L7 inference gateway.
//   geogate --config FILE                          run
//   geogate --check --config FILE                  validate as start-up would, exit 1 on errors
//   geogate --check --syntax-only --config FILE    schema and values only (CI lint)
//   geogate --version
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "common/log.h"
#include "common/strings.h"
#include "config/check.h"
#include "config/loader.h"
#include "server/named_files.h"
#include "server/server.h"

namespace {

void Usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: geogate --config FILE          run the gateway\n"
      "       geogate --check --config FILE  validate FILE as start-up would and exit:\n"
      "                                      schema and values, every api_key_env set, and\n"
      "                                      the geo database, TLS certificates and keys and\n"
      "                                      CA files opened; each error on stderr as\n"
      "                                      FILE:LINE:COL: message; exit 1 on any, else 0\n"
      "       geogate --check --syntax-only --config FILE\n"
      "                                      schema and values only: no file the config\n"
      "                                      names is opened and no api_key_env need be set\n"
      "                                      (lint in CI without secrets, certs or .mmdb)\n"
      "       geogate --version\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  bool check = false;
  bool syntax_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--version" || a == "-v") {
      std::printf("geogate %s\n", GEOGATE_VERSION);
      return 0;
    } else if (a == "--help" || a == "-h") {
      Usage(stdout);
      return 0;
    } else if (a == "--check" || a == "-t") {
      check = true;
    } else if (a == "--syntax-only") {
      syntax_only = true;
    } else if ((a == "--config" || a == "-c") && i + 1 < argc) {
      config_path = argv[++i];
    } else if (a.starts_with("--config=")) {
      config_path = std::string(a.substr(9));
    } else {
      std::fprintf(stderr, "geogate: unknown argument '%s'\n", argv[i]);
      Usage(stderr);
      return 2;
    }
  }
  if (config_path.empty()) {
    Usage(stderr);
    return 2;
  }
  if (syntax_only && !check) {
    std::fprintf(stderr, "geogate: --syntax-only goes with --check\n");
    Usage(stderr);
    return 2;
  }
  if (check) {
    geogate::config::CheckOptions options;
    options.syntax_only = syntax_only;
    // The same openers start-up and reload use (DESIGN.md §8).
    options.open_files = geogate::server::CheckNamedFiles;
    return geogate::config::RunCheck(config_path, std::cout, std::cerr, options);
  }

  geogate::config::LoadResult loaded = geogate::config::LoadFile(config_path);
  for (const auto& w : loaded.warnings)
    std::fprintf(stderr, "%s: warning: %s\n", config_path.c_str(), w.c_str());
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors)
      std::fprintf(stderr, "%s\n", e.ToString().c_str());
    return 1;
  }
  // Signals are taken by the server's signal_set; a peer that goes away
  // mid-write must not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  if (absl::Status st = geogate::server::Server::CheckAsioBackend(); !st.ok()) {
    geogate::common::LogError("startup", geogate::ToStd(st.message()));
    return 1;
  }
  geogate::server::Server server(config_path, loaded.snapshot);
  return server.Run();
}
