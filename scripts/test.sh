#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, vet, and every test
# (unit, conformance, public vectors, black-box tests of the binary against
# real redis-server processes) under the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Redis tests start their own redis-server processes on free loopback
# ports; they need the binaries, not a running server.
have_redis() { command -v redis-server >/dev/null && command -v redis-cli >/dev/null; }
if ! have_redis; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "scripts/test.sh: installing redis-server (apt-get)"
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

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
if [ -n "$unformatted" ]; then
  echo "scripts/test.sh: gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...
# The peer benchmark is a module of its own (bench/peers/redisrate): vet it
# so that it keeps building.
(cd bench/peers/redisrate && go vet ./...)
go test -race -count=1 -timeout 12m ./...

# Short fuzzing: the handler (no 5xx for any body), the fast decoder
# against encoding/json, config parsing, id canonicalisation (a fixed
# point), and the memory source's table against a map. Their seed corpora
# already ran above as ordinary tests. The budgets are counts of inputs,
# about 10 s each or less on a 2-core machine, not
# durations: Go 1.26's fuzzing coordinator can fail a run with a bare
# "context deadline exceeded" when a -fuzztime duration ends while a worker
# is busy (golang/go#75804, fixed in Go 1.27), and a count has no deadline.
go test -run '^$' -fuzz '^FuzzHandler$' -fuzztime 80000x ./httpapi/
go test -run '^$' -fuzz '^FuzzFastDecode$' -fuzztime 100000x ./httpapi/
go test -run '^$' -fuzz '^FuzzParseConfig$' -fuzztime 60000x ./ratelimits/
go test -run '^$' -fuzz '^FuzzCanonicalize$' -fuzztime 150000x ./ratelimits/
go test -run '^$' -fuzz '^FuzzTableAgainstModel$' -fuzztime 50000x ./source/memory/
