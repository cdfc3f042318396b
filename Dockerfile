# syntax=docker/dockerfile:1
#
# The shardkeeper image: one static binary at /shardkeeper, run as uid 10001.
#
#   docker build -t shardkeeper:local \
#     --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg COMMIT="$(git rev-parse HEAD)" .
#   docker run --rm -p 127.0.0.1:8080:8080 shardkeeper:local    # a one-node cluster
#
# Without the build arguments the binary reports version "dev" (.git is not sent to the
# build). See deploy/README.md for a three-node cluster with Docker Compose or Kubernetes.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=""
ARG COMMIT=""
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags "-X github.com/shardkeeper/shardkeeper/buildinfo.version=${VERSION} -X github.com/shardkeeper/shardkeeper/buildinfo.commit=${COMMIT}" \
      -o /out/shardkeeper ./cmd/shardkeeper

# Debian slim rather than a shell-less base: the health check uses curl, and the Compose and
# Kubernetes kits use sh in a short init step that hands each node its own key files with the
# owner-only modes the node requires. ca-certificates: the NEAR relayer calls RPC over HTTPS.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 shardkeeper \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
      --home-dir /var/lib/shardkeeper --shell /usr/sbin/nologin shardkeeper \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/shardkeeper
COPY --from=build /out/shardkeeper /shardkeeper
USER 10001:10001
ENV SHARDKEEPER_DATA_DIR=/var/lib/shardkeeper

# HTTP API, admin listener (when --admin-addr is set), gossip (TCP and UDP), Raft, remoting.
EXPOSE 8080/tcp 9090/tcp 7946/tcp 7946/udp 7000/tcp 8090/tcp

# Ready, not merely alive: this is what a load balancer should route by. Orchestrators must
# not restart a node for failing it (a whole cluster fails it while a partition has no
# leader); Docker itself only reports it. The health endpoints are on the HTTP listener, so
# this assumes --http-addr keeps port 8080.
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 \
  CMD ["curl", "-fsS", "-o", "/dev/null", "--max-time", "2", "http://127.0.0.1:8080/readyz"]

ENTRYPOINT ["/shardkeeper"]
# A one-node cluster with the API on every interface; the peer listeners stay on loopback.
# A cluster replaces this command (deploy/compose, deploy/k8s).
CMD ["serve", "--data-dir", "/var/lib/shardkeeper", "--http-addr", "0.0.0.0:8080", "--advertise-addr", "127.0.0.1"]
