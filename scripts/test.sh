#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, vet, and every test
# (unit, conformance, public vectors, black-box tests of the binary against
# real redis-server processes) under the race detector, the container image
# built and run under Docker, then short fuzzing.
#
# It says what it is doing: a "==> stage" line, with the seconds elapsed
# since the start, before each stage, and go test's own line per package as
# each one finishes. go test's output is left as it is, unfiltered and
# unpiped, so its closing lines and the exit code are the run's verdict.
#
# It needs no network once the dependencies of the main module, client/,
# deploy/ and bench/ are downloaded (go mod download in each). The
# benchmark peer in bench/peers/redisrate is a module of its own with
# dependencies of its own; the load harness builds it when asked (go -C
# bench run ./harness -sources ...,redisrate), and nothing here does.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
stage() { echo "==> $* ($((SECONDS - start))s elapsed)"; }
# Some stages print nothing for minutes (go vet compiling every package on
# a cold cache, go test waiting on the slowest package): a line every 20 s
# says the run is alive.
heartbeat() { while sleep 20; do echo "... still running ($((SECONDS - start))s elapsed)"; done; }
heartbeat &
heartbeat_pid=$!
trap 'kill "$heartbeat_pid" 2>/dev/null' EXIT

# The tools the tests run, each from Debian's packages; only the binaries
# matter, so a package whose own service fails to start (no init system, a
# port taken) is judged by its binary, not by apt-get's exit code:
#   redis-server, redis-cli  the Redis tests start servers of their own on
#                            free loopback ports
#   nginx, caddy             the proxy tests run them in front of the
#                            service with deploy/nginx and deploy/caddy
#                            (Debian puts nginx in /usr/sbin, which is not
#                            in every user's PATH; the tests look there too)
#   docker, dockerd          the image tests build and run the image
#                            (docker.io; the daemon is started below; a
#                            client alone, without dockerd, is not enough)
#   promtool                 the alerting rules' tests (prometheus)
#   systemd-analyze          the unit's check (systemd)
#   chromium                 the operator page's tests drive it headless
#                            (test/browser, through chromedp)
# What is missing is installed in one apt-get run when root, and the run
# fails loudly when it cannot be.
have() { command -v "$1" >/dev/null || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }
tools=(redis-server:redis-server redis-cli:redis-server nginx:nginx caddy:caddy docker:docker.io dockerd:docker.io
  promtool:prometheus systemd-analyze:systemd chromium:chromium)
missing=()
for t in "${tools[@]}"; do
  have "${t%%:*}" || missing+=("${t#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  packages=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    stage "installing $packages(apt-get)"
    apt-get update -qq || true
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >/dev/null || true
  fi
  for t in "${tools[@]}"; do
    if ! have "${t%%:*}"; then
      echo "scripts/test.sh: ${t%%:*} is required; install it (e.g. sudo apt-get install -y ${t#*:})" >&2
      exit 1
    fi
  done
fi

# The image tests need a Docker daemon that answers. One that does not is
# started as root and left running; CI ends every process after the run.
# If dockerd cannot set up its bridge network (no iptables, or no
# permission for it, as in some sandboxes), it is started again without
# one: the image tests run their containers with --network host or
# --network none, which need no bridge.
docker_answers() { docker info >/dev/null 2>&1; }
# start_dockerd LOG [FLAGS...] starts dockerd and waits up to 30 s for it
# to answer: 0 once it does, 1 if it exited, 2 if it runs without answering.
start_dockerd() {
  local log=$1
  shift
  setsid dockerd "$@" </dev/null >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 60); do
    if docker_answers; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    sleep 0.5
  done
  return 2
}
if ! docker_answers; then
  if [ "$(id -u)" = 0 ] && command -v dockerd >/dev/null; then
    dockerd_log=${TMPDIR:-/tmp}/limiter-dockerd.log
    stage "starting dockerd (log in $dockerd_log)"
    started=0
    start_dockerd "$dockerd_log" || started=$?
    if [ "$started" = 1 ]; then
      stage "dockerd exited; starting it without a bridge network (--iptables=false --bridge=none; log in $dockerd_log.nobridge)"
      start_dockerd "$dockerd_log.nobridge" --iptables=false --ip6tables=false --bridge=none || true
    fi
  fi
  if ! docker_answers; then
    echo "scripts/test.sh: no Docker daemon answers (docker info); start one (sudo dockerd, or its service), or run as root to have this script start it (its log, if it tried: ${TMPDIR:-/tmp}/limiter-dockerd.log*)" >&2
    docker info >&2 || true
    exit 1
  fi
fi

# Build output does not belong in the tree: a tracked file over 1 MB outside
# a testdata folder fails the run.
stage "tracked files over 1 MB"
large=$(git ls-files -z 2>/dev/null | xargs -0 -r du -k 2>/dev/null | awk '$1 > 1024 {print $2}' | grep -v '/testdata/\|^testdata/' || true)
if [ -n "$large" ]; then
  echo "scripts/test.sh: tracked files over 1 MB outside testdata (build output?): $large" >&2
  exit 1
fi

stage "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
  echo "scripts/test.sh: gofmt would change: $unformatted" >&2
  exit 1
fi

# vet with the race detector's build flags: it then compiles every
# package as the race-detector tests below do, and they reuse that from the
# build cache instead of compiling everything a second time (about 90 s on
# a fresh 2-core machine).
stage "go vet"
go vet -race ./...

# Packages are reported in order as they finish; the black-box tests in
# test/ and the Redis source's take the longest. The slowest black-box
# tests, each with a limiter and a redis-server of its own, run in
# parallel (t.Parallel); -parallel 8 lets eight of them overlap on two
# cores, as most of their time is spent waiting on processes (on a 2-core
# machine, test/ takes 128 s so, against 155 s with -parallel 4).
stage "go test (race detector, every package)"
go test -race -count=1 -parallel 8 -timeout 12m ./...

# The Go client, a module of its own that requires nothing (./... above
# stops at its go.mod): its own tests, which need no service. Its calls
# against the service's handler are tested above, in test/client.
# Vetted with the race detector's flags, like the main module, so that vet
# and the tests share one build of every package (about 50 s less on a
# cold cache).
stage "client/ (the Go client's module)"
(cd client && go vet -race ./... && go test -race -count=1 ./...)

# The load harness and its references are a module of their own (bench/),
# which ./... above stops at: vetted and tested here, nginx end to end
# included. Vetted with the race detector's flags, and its tests build the
# limiter and bare with them, so that all of it reuses the service's build
# above instead of compiling every package once more without them.
stage "bench/ (the load harness)"
(cd bench && go vet -race ./... && go test -race -count=1 ./...)

# The release script, for one target: its tarball matches SHA256SUMS and
# holds a binary that says the version it was given. (The other targets
# differ only in GOOS and GOARCH.)
stage "release script (linux/amd64)"
release=$(mktemp -d)
RELEASE_TARGETS=linux/amd64 VERSION=v0.0.0-release-check scripts/release.sh "$release" >/dev/null
(cd "$release" && sha256sum --quiet -c SHA256SUMS && tar -xzf limiter_v0.0.0-release-check_linux_amd64.tar.gz)
if ! "$release/limiter_v0.0.0-release-check_linux_amd64/limiter" version | grep -q '^limiter v0.0.0-release-check'; then
  echo "scripts/test.sh: the released binary does not say its version" >&2
  exit 1
fi
rm -rf "$release"

# The container image, built from this checkout and run: its tests are
# behind the build tag image (go test ./... above needs no Docker), so they
# are vetted here too, with the race detector's flags, whose build of the
# standard library the stages above made. The image's static binary
# (CGO_ENABLED=0, -trimpath) is the release script's, from the build cache.
stage "container image (scripts/image.sh, go test -race -tags image ./test/image/)"
export LIMITER_IMAGE=${LIMITER_IMAGE:-limiter:dev}
go vet -race -tags image ./test/image/
./scripts/image.sh "$LIMITER_IMAGE"
go test -race -tags image -count=1 -timeout 5m ./test/image/

# The operator's page (/ui/) in a real headless Chromium: denials made
# over HTTP on the page, the lookup, a wrong token refused. Behind the
# build tag browser (go test ./... above needs no browser), so vetted here
# too; under the race detector, whose build of the limiter it reuses.
stage "operator page (go test -race -tags browser ./test/browser/)"
go vet -race -tags browser ./test/browser/
go test -race -tags browser -count=1 -timeout 3m ./test/browser/

# The Kubernetes manifests (deploy/kubernetes) and the Envoy snippet beside
# them, checked without a cluster by deploy/, a module of its own that keeps
# kustomize and the Kubernetes API types out of the main module's
# dependencies (./... above stops at its go.mod). Its tests render every
# kustomization, decode each object strictly into its Kubernetes type, check
# the settings against the binary they build from this tree, and start that
# binary with them for a moment. Under the race detector, whose build of
# the standard library the stages above made; the binary is built as the
# release script builds it, so from the build cache too.
stage "deploy/ (Kubernetes manifests)"
(cd deploy && go vet -race ./... && go test -race -count=1 ./...)

# Short fuzzing: the handler (no 5xx for any body), the decoder (only
# its own refusals, no invented U+FFFD), the fast encoder
# (against encoding/json), config, descriptors-file and forward-auth-file parsing, the
# join of descriptor values into an id (injective), id
# canonicalisation (a fixed point), and the memory source's table against
# a map. Their seed corpora
# already ran above as ordinary tests. The budgets are counts of inputs,
# a few seconds each on a 2-core machine, not
# durations: Go 1.26's fuzzing coordinator can fail a run with a bare
# "context deadline exceeded" when a -fuzztime duration ends while a worker
# is busy (golang/go#75804, fixed in Go 1.27), and a count has no deadline.
fuzz() {
  stage "fuzz $1 ($2 inputs, $3)"
  # A renamed fuzzer must fail the run, not fuzz nothing: go test only warns.
  if ! grep -q "^func $1(" "$3"*_test.go; then
    echo "no fuzzer $1 in $3" >&2
    exit 1
  fi
  # limiter_fuzz leaves out test files whose dependencies a fuzz build
  # need not instrument (the OpenAPI validator of httpapi's contract
  # tests, which the test stage above has run).
  go test -tags limiter_fuzz -run '^$' -fuzz "^$1\$" -fuzztime "$2x" "$3"
}
fuzz FuzzHandler 20000 ./httpapi/
fuzz FuzzDecode 25000 ./httpapi/
fuzz FuzzEncode 10000 ./httpapi/
fuzz FuzzParseConfig 15000 ./configfile/
fuzz FuzzParseDescriptors 10000 ./configfile/
fuzz FuzzParseForwardAuth 10000 ./configfile/
fuzz FuzzRequestCodec 20000 ./envoyapi/
fuzz FuzzCanonicalize 40000 ./ratelimits/
fuzz FuzzStoreAgainstModel 12000 ./source/memory/internal/table/
