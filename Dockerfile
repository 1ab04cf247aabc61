# The limiter's container image: the static binary, a CA bundle and the
# bundled configuration, on an empty base, run as a user without a name or
# privileges.
#
# The build context is not the repository: scripts/image.sh builds the
# binary (CGO_ENABLED=0, the version stamped) and stages a context of its
# own holding
#   limiter                  the static binary
#   ca-certificates.crt      the build host's CA bundle, for rediss:// sources
#   config/*.yaml            the bundled configuration
#   Dockerfile               this file
# and builds it there: ./scripts/image.sh [TAG] (limiter:dev by default).
#
# The base is scratch, which is nothing to pull, so the image builds on a
# machine without a network. With a registry at hand, a distroless base may
# take its place:
#   FROM gcr.io/distroless/static-debian12:nonroot
# It brings its own CA bundle, /etc/passwd entries (user nonroot is
# 65532:65532, the USER below) and time zone data; the COPY of
# ca-certificates.crt may then go.
FROM scratch

# Go's crypto/x509 reads this path first on Linux.
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY config/ /etc/limiter/
# After the files that rarely change, so that their layers stay cached.
COPY limiter /limiter

# A numeric user, so that a runtime checking runAsNonRoot sees it is not
# root without an /etc/passwd to look it up in. The files above stay owned
# by root and are only read.
USER 65532:65532

# The defaults are the binary's own variables, not flags in CMD, so a
# deployment changes any of them the same way (-e, env:), and a flag given
# after the image name still beats them. An empty value turns a setting
# off (LIMITER_GRPC_LISTEN=, LIMITER_ADMIN_TOKEN_FILE=).
#
# The API listens on every interface of the container, so serve refuses to
# start without the admin token file: mount one (a Kubernetes Secret, a
# Docker secret, a bind mount) at LIMITER_ADMIN_TOKEN_FILE, one token per
# line, readable by 65532.
ENV LIMITER_LISTEN=0.0.0.0:8080 \
    LIMITER_GRPC_LISTEN=0.0.0.0:8081 \
    LIMITER_DEFAULTS=/etc/limiter/defaults.yaml \
    LIMITER_OVERRIDES=/etc/limiter/overrides.yaml \
    LIMITER_DESCRIPTORS=/etc/limiter/descriptors.yaml \
    LIMITER_FORWARD_AUTH=/etc/limiter/forward-auth.yaml \
    LIMITER_ADMIN_TOKEN_FILE=/run/secrets/limiter/admin-tokens \
    LIMITER_SHUTDOWN_TIMEOUT=4s

# LIMITER_SHUTDOWN_TIMEOUT: a stop ends within docker stop's 10 s grace. It
# bounds the drain of requests, and then the last push of hits counted in
# process memory (sync_rate) to a Redis that does not answer: twice 4 s at
# most (the binary's own default, 15 s, would outlast the grace).

# HTTP API (and /healthz, /readyz, /metrics), and Envoy's rate-limit
# service over gRPC.
EXPOSE 8080 8081

# The binary is PID 1: SIGTERM (docker stop, a pod's end) drains and exits
# 0, SIGHUP reloads the configuration and tokens.
ENTRYPOINT ["/limiter"]
CMD ["serve"]

# The version scripts/image.sh stamped into the binary (`limiter version`
# prints it too). Last, as it changes with every commit.
ARG VERSION=dev
LABEL org.opencontainers.image.title="limiter" \
      org.opencontainers.image.description="A rate-limit service: exact, atomic limits over HTTP and Envoy's gRPC rate-limit API" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
