# geogate container image.
#
# Two stages on Debian 12: the build stage installs the compilers and -dev
# packages with the project's own package list (scripts/setup-debian.sh
# --build-only) and builds the release binary; the runtime stage has only
# the shared libraries geogate links (setup-debian.sh --runtime), curl for
# the health check and the Kubernetes hooks, and a non-root user.
#
#   docker build -t geogate .
#   docker run --rm -v /etc/geogate:/etc/geogate:ro geogate --check
#   docker run -d --name geogate --stop-timeout 45 \
#     -p 8080:8080 -p 8443:8443 \
#     -v /etc/geogate:/etc/geogate:ro -v /var/lib/geogate:/var/lib/geogate:ro \
#     --env-file /etc/geogate/geogate.env geogate
#
# --stop-timeout must exceed drain_delay_ms + drain_timeout_ms (32 s with the
# defaults): `docker stop` sends SIGTERM, geogate drains, and Docker's default
# of 10 s would SIGKILL streams still in flight. docs/operations.md has the
# details. CI checks this file statically (tests/deploy/test_dockerfile.py)
# and builds and runs the image with podman (tests/deploy/test_container.py:
# `podman build --build-context build=DIR` puts an already built
# DIR/src/build-release/server/geogate in place of the build stage).

ARG DEBIAN_IMAGE=debian:12-slim

# ---------------------------------------------------------------- build ----
FROM ${DEBIAN_IMAGE} AS build
WORKDIR /src
# The package list first, so the apt layer is cached across source changes.
COPY scripts/setup-debian.sh scripts/setup-debian.sh
RUN scripts/setup-debian.sh --build-only && rm -rf /var/lib/apt/lists/*
COPY CMakeLists.txt CMakePresets.json ./
COPY config config
COPY health health
COPY routing routing
COPY common common
COPY observability observability
COPY tracing tracing
COPY accounting accounting
COPY proxy proxy
COPY server server
COPY bench bench
RUN cmake --preset release \
 && cmake --build --preset release --target geogate \
 && build-release/server/geogate --version

# -------------------------------------------------------------- runtime ----
FROM ${DEBIAN_IMAGE} AS runtime
COPY scripts/setup-debian.sh /tmp/setup-debian.sh
# setup-debian.sh --runtime runs apt-get update; curl uses the same lists.
RUN /tmp/setup-debian.sh --runtime \
 && apt-get install -y -qq --no-install-recommends curl \
 && rm -rf /var/lib/apt/lists/* /tmp/setup-debian.sh \
 && groupadd --system --gid 10001 geogate \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin geogate \
 && mkdir -p /etc/geogate /var/lib/geogate

COPY --from=build /src/build-release/server/geogate /usr/local/bin/geogate
# The config-reload sidecar of deploy/kubernetes runs this same image.
COPY deploy/kubernetes/geogate-reload-watch /usr/local/bin/geogate-reload-watch
COPY examples /usr/share/geogate/examples

LABEL org.opencontainers.image.title="geogate" \
      org.opencontainers.image.description="Geo-aware L7 inference gateway for LLM traffic"

# Config (geogate.toml, TLS files) and the geo database come from the host or
# the orchestrator; nothing in the image is configuration.
VOLUME ["/etc/geogate", "/var/lib/geogate"]

# Client listeners (plain, TLS) and the admin endpoint. The admin endpoint
# binds where gateway.admin.address says (127.0.0.1:9901 by default, which is
# reachable only from inside the container): publish 9901 only with an
# admin address of 0.0.0.0:9901 and only to a trusted network.
EXPOSE 8080 8443 9901

# Numeric, so Kubernetes' runAsNonRoot can verify it.
USER 10001:10001

# geogate drains on SIGTERM: /readyz turns 503, listeners close after
# drain_delay_ms, in-flight streams get drain_timeout_ms.
STOPSIGNAL SIGTERM

# The check runs inside the container, so loopback reaches the default admin
# address. Set GEOGATE_ADMIN_URL when gateway.admin.address is elsewhere.
# /readyz is 503 while no backend is healthy and while draining: this marks
# the container unhealthy, it does not restart it (Docker never does).
ENV GEOGATE_ADMIN_URL=http://127.0.0.1:9901
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD curl -fsS -o /dev/null --max-time 2 "$GEOGATE_ADMIN_URL/readyz" || exit 1

# Arguments after the image name are appended: `docker run IMAGE --check`
# validates the mounted config and exits.
ENTRYPOINT ["/usr/local/bin/geogate", "--config", "/etc/geogate/geogate.toml"]
