#!/usr/bin/env bash
# Counts the instructions redis-server runs per decision of the Redis
# source's bucket script, under valgrind's callgrind: unlike seconds, the
# count repeats within a fraction of a percent on a noisy machine.
#
#   bench/script-instructions.sh [script.lua] [calls]
#
# Without script.lua it counts the script the source loads: the fragments
# of source/redis/lua joined (source/redis/script.go).
#   GROUPED=1 bench/script-instructions.sh      # key format v2
#   BINARY=1 bench/script-instructions.sh       # TATs written in binary
#   MODE=window bench/script-instructions.sh    # sliding-window spends
#   MODE=check_rate bench/script-instructions.sh  # check_rate's spends
#   MODE=erl_call bench/script-instructions.sh  # ERL calls (operation E)
#   PACK=1 bench/script-instructions.sh         # one decision per call
#   INCREMENT=10000000 BURST=1000000000 bench/script-instructions.sh
#                                    # GCRA at the harness's 100/s, burst 100
#
# Each call is one packed EVALSHA (operation M) of PACK (default ten)
# decisions, as the source sends under concurrent load, over PACK x 1,000
# keys created by a warm-up. MODE picks the decision: gcra (the default) a
# one-key GCRA spend, folded (one binary argument); window a one-key spend
# of a sliding window of 100 hits a minute; check_rate a spend of one hit
# on a rate counter of 100 a second over 10 s with its box, folded as the
# source sends POST /v1/erl/check_rate (ratelimits.checkRateAsSpend)
# in format v1; erl_call the same
# as an Edge Rate Limiting call (operation E), as check_rates sends it.
# PACK=0 sends each
# decision as a call of its own, in its own operation, as the source does
# for a call that finds nothing queued. With GROUPED=1 the calls ask for
# key format v2 (ARGV[3] = 2) and the buckets are fields of 1,000 hashes.
#
# CPU=1 measures seconds instead of instructions: Redis's CPU (utime +
# stime, /proc/PID/stat) per decision under 50 clients each sending one
# call at a time, Redis pinned to CPU 1 and the clients to CPU 0 so that
# neither slows the other, beside the same load of two references: one
# INCR per request (the bare + INCR row of bench/harness), and a script
# that only reads and writes each of its keys (GET, then SET … KEEPTTL,
# 10 a call): the least any script deciding from a stored value costs.
# Each is measured ROUNDS times (default 3), alternating; the medians are
# printed with their ratios to INCR.
# The calls come from bench/script-calls.py (a folded batch is binary,
# which redis-benchmark cannot send), through redis-cli --pipe.
# Needs valgrind (not with CPU=1), redis-server, redis-cli, python3.
set -euo pipefail
lua=${1:-}
calls=${2:-3000}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
if [[ -z $lua ]]; then
	lua="$dir/bucket.lua"
	(cd "$(dirname "$0")/.." && LIMITER_SCRIPT_OUT="$lua" go test -count=1 -run '^TestScriptText$' ./source/redis >/dev/null)
fi

if [[ -n ${CPU:-} ]]; then
	taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$dir/redis.log" 2>&1 &
else
	valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$dir/redis.log" 2>&1 &
fi
vpid=$!
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
sha=$(redis-cli -p "$port" script load "$(cat "$lua")")

calls_py="$(dirname "$0")/script-calls.py" # builds the calls: a folded batch is binary
mode=${MODE:-gcra} batches=${PACK:-10}
((batches > 0)) || batches=1
# send CALLS: that many calls through redis-cli --pipe, which must answer no error
send() {
	local out
	out=$(python3 "$calls_py" resp "$sha" "$1" | redis-cli -p "$port" --pipe)
	grep -q 'errors: 0,' <<<"$out" || { echo "$out" >&2; exit 1; }
}
send 2000
if [[ -n ${CPU:-} ]]; then
	hz=$(getconf CLK_TCK)
	n=$((calls * 50)) # requests per measure
	cpu() { awk '{print $14 + $15}' "/proc/$vpid/stat"; }
	# usage NAME DECISIONS-PER-REQUEST COMMAND...: Redis CPU µs per decision
	usage() {
		local name=$1 per=$2 a b
		shift 2
		a=$(cpu)
		taskset -c 0 python3 "$calls_py" load "$port" 50 "$n" "$@"
		b=$(cpu)
		echo "$name $(awk -v t=$((b - a)) -v hz="$hz" -v n="$n" -v per="$per" 'BEGIN { printf "%.3f", t / hz * 1e6 / (n * per) }')" >>"$dir/cpu"
	}
	minimal='local r = {} for i = 1, #KEYS do r[i] = redis.pcall("GET", KEYS[i]) or "" redis.pcall("SET", KEYS[i], ARGV[i], "KEEPTTL") end return r'
	msha=$(redis-cli -p "$port" script load "$minimal")
	for _ in $(seq "${ROUNDS:-3}"); do
		usage incr 1 incr
		usage minimal 10 minimal "$msha"
		usage script "$batches" script "$sha"
	done
	awk '{ v[$1] = v[$1] " " $2 } END {
		for (k in v) { n = split(substr(v[k], 2), a, " "); asort(a); med[k] = a[int((n + 1) / 2)] }
		printf "Redis CPU per decision, medians (µs): INCR per request %.2f; GET + SET per key %.2f (%.2f× INCR); '"$mode"' %.2f (%.2f× INCR)\n",
			med["incr"], med["minimal"], med["minimal"] / med["incr"], med["script"], med["script"] / med["incr"]
	}' "$dir/cpu"
	exit 0
fi
callgrind_control -d "$vpid" >/dev/null 2>&1 # part 1: start-up and warm-up
redis-cli -p "$port" config resetstat >/dev/null
sleep 1
send "$calls"
callgrind_control -d "$vpid" >/dev/null 2>&1 # part 2: the measured calls
sleep 1
ir=$(awk '/^summary:/ {print $2; exit}' "$dir/cg.out.2")
redis-cli -p "$port" info commandstats | grep -E 'cmdstat_(evalsha|get|set|psetex|mget):' | tr -d '\r'
if [[ -n ${ANNOTATE:-} ]]; then
	callgrind_annotate --inclusive=yes "$dir/cg.out.2" | head -"${ANNOTATE}"
fi
echo "$mode instructions per decision: $((ir / (calls * batches))) ($ir for $calls calls of $batches)"
