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
#
# Each call is one packed EVALSHA (operation M) of ten one-key spends, as
# the source sends under concurrent load, over 10 x 1,000 keys created by
# a warm-up. With GROUPED=1 the calls ask for key format v2 (ARGV[3] = 2)
# and the buckets are fields of 1,000 hashes, ten each.
# Needs valgrind, redis-server, redis-cli, redis-benchmark.
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

valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$dir/redis.log" 2>&1 &
vpid=$!
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
sha=$(redis-cli -p "$port" script load "$(cat "$lua")")

# the packed call's header: operation, expiry margin (ms), key format
keys=() argv=(M 60000 "$([[ -n ${GROUPED:-} ]] && echo 2 || echo 1)")
for b in $(seq 10); do
	if [[ -n ${GROUPED:-} ]]; then
		keys+=("lim:v2:{__rand_int__}3:key-$b")
	else
		keys+=("lim:v1:{3:key-$b-__rand_int__}")
	fi
	# a one-key spend of mode 0, folded as the source packs it (S0), now as
	# (seconds, nanoseconds), increment 36 s, burst offset 1 h
	argv+=(S0 1790000000 123456789 36000000000 3600000000000)
done
redis-benchmark -p "$port" -n 2000 -r 1000 -P 10 -c 1 EVALSHA "$sha" 10 "${keys[@]}" "${argv[@]}" >/dev/null
callgrind_control -d "$vpid" >/dev/null 2>&1 # part 1: start-up and warm-up
redis-cli -p "$port" config resetstat >/dev/null
sleep 1
redis-benchmark -p "$port" -n "$calls" -r 1000 -P 10 -c 1 EVALSHA "$sha" 10 "${keys[@]}" "${argv[@]}" >/dev/null
callgrind_control -d "$vpid" >/dev/null 2>&1 # part 2: the measured calls
sleep 1
ir=$(awk '/^summary:/ {print $2; exit}' "$dir/cg.out.2")
redis-cli -p "$port" info commandstats | grep -E 'cmdstat_(evalsha|get|set|mget):' | tr -d '\r'
echo "instructions per decision: $((ir / (calls * 10))) ($ir for $calls calls of 10)"
