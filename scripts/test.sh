#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, vet, and every test
# (unit, conformance, public vectors, black-box tests of the binary against
# real redis-server processes) under the race detector, then short fuzzing.
#
# It says what it is doing: a "==> stage" line, with the seconds elapsed
# since the start, before each stage, and go test's own line per package as
# each one finishes. go test's output is left as it is, unfiltered and
# unpiped, so its closing lines and the exit code are the run's verdict.
#
# It needs no network once the main module's dependencies are downloaded
# (go mod download). The benchmark peer in bench/peers/redisrate is a module
# of its own with dependencies of its own; the load harness builds it when
# asked (go run ./bench/harness -sources ...,redisrate), and nothing here
# does.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$SECONDS
stage() { echo "==> $* ($((SECONDS - start))s elapsed)"; }

# The Redis tests start their own redis-server processes on free loopback
# ports; they need the binaries, not a running server.
have_redis() { command -v redis-server >/dev/null && command -v redis-cli >/dev/null; }
if ! have_redis; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    stage "installing redis-server (apt-get)"
    # The package's own service may fail to start where there is no init
    # system or its port is taken; only the binaries matter here, so the
    # outcome is judged by them, not by apt-get's exit code.
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null || true
  fi
  if ! have_redis; then
    echo "scripts/test.sh: redis-server and redis-cli are required; install them (e.g. sudo apt-get install -y redis-server)" >&2
    exit 1
  fi
fi

# The nginx tests run nginx (a child process of the test, no root needed, on a free
# loopback port) in front of the service, with the shipped
# deploy/nginx/limiter.conf; they need the binary only. Debian installs it
# in /usr/sbin, which is not in every user's PATH; the tests look there too.
have_nginx() { command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; }
if ! have_nginx; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    stage "installing nginx (apt-get)"
    # As for redis-server: the package's service may fail to start (no init
    # system, port 80 taken), which does not matter here.
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null || true
  fi
  if ! have_nginx; then
    echo "scripts/test.sh: nginx is required (in PATH or /usr/sbin); install it (e.g. sudo apt-get install -y nginx)" >&2
    exit 1
  fi
fi

# The Caddy tests run Caddy (a child process of the test, no root needed, on
# a free loopback port, without its admin endpoint) in front of the service,
# with the shipped deploy/caddy/Caddyfile; they need the binary only, which
# Debian installs in /usr/bin.
have_caddy() { command -v caddy >/dev/null || [ -x /usr/bin/caddy ]; }
if ! have_caddy; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    stage "installing caddy (apt-get)"
    # As for nginx: the package's service may fail to start, which does not
    # matter here.
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq caddy >/dev/null || true
  fi
  if ! have_caddy; then
    echo "scripts/test.sh: caddy is required (in PATH or /usr/bin); install it (e.g. sudo apt-get install -y caddy)" >&2
    exit 1
  fi
fi

# The alerting rules in deploy/prometheus are checked and unit-tested with
# promtool, which Debian's prometheus package installs in /usr/bin; only
# the binary matters (the package's server may fail to start, as above).
have_promtool() { command -v promtool >/dev/null || [ -x /usr/bin/promtool ]; }
if ! have_promtool; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    stage "installing prometheus, for promtool (apt-get)"
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null || true
  fi
  if ! have_promtool; then
    echo "scripts/test.sh: promtool is required (in PATH or /usr/bin); install it (e.g. sudo apt-get install -y prometheus)" >&2
    exit 1
  fi
fi

# The systemd unit in deploy/systemd is checked with systemd-analyze
# verify, which needs no running systemd; Debian's systemd package has it.
if ! command -v systemd-analyze >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    stage "installing systemd, for systemd-analyze (apt-get)"
    apt-get update -qq || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null || true
  fi
  if ! command -v systemd-analyze >/dev/null; then
    echo "scripts/test.sh: systemd-analyze is required; install it (e.g. sudo apt-get install -y systemd)" >&2
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
# parallel (t.Parallel); -parallel 4 lets four of them overlap on two
# cores, as most of their time is spent waiting on processes.
stage "go test (race detector, every package)"
go test -race -count=1 -parallel 4 -timeout 12m ./...

# Short fuzzing: the handler (no 5xx for any body), the fast decoders and
# the fast encoder (each against encoding/json), config, descriptors-file and forward-auth-file parsing, the
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
fuzz FuzzFastDecode 25000 ./httpapi/
fuzz FuzzERLFastDecode 25000 ./httpapi/
fuzz FuzzEncode 10000 ./httpapi/
fuzz FuzzLaneMatchesNetHTTP 10000 ./httpapi/fastlane/
fuzz FuzzParseConfig 15000 ./ratelimits/configfile/
fuzz FuzzParseDescriptors 10000 ./ratelimits/configfile/
fuzz FuzzJoinInjective 20000 ./envoyapi/descriptors/
fuzz FuzzParseForwardAuth 10000 ./ratelimits/configfile/
fuzz FuzzCanonicalize 40000 ./ratelimits/
fuzz FuzzStoreAgainstModel 12000 ./source/memory/internal/table/
