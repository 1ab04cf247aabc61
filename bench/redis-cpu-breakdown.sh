#!/usr/bin/env bash
# Splits Redis's CPU per request under load into user and system time, and
# shows INFO commandstats (what the script's commands cost inside it): one
# limiter on the Redis source with the bundled config (or, with BARE=1,
# bench/bare making one INCR per request) on a private redis-server, loaded
# by wrk with bench/spend.lua (50 connections) for 10 s after a 3 s warm-up.
#
#   bench/redis-cpu-breakdown.sh                 # the limiter, decimal TATs
#   BINARY=1 bench/redis-cpu-breakdown.sh        # with --redis-binary-tats
#   BARE=1 bench/redis-cpu-breakdown.sh          # one INCR per request
#
# Needs redis-server, redis-cli and wrk. Seconds on a shared machine vary
# from run to run: compare runs made one after the other.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port) listen=127.0.0.1:$(free_port)
server=
cleanup() {
	[[ -z $server ]] || kill "$server" 2>/dev/null || true
	redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --logfile "$dir/redis.log"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
rpid=$(redis-cli -p "$port" info server | tr -d '\r' | awk -F: '/^process_id/ {print $2}')
if [[ -n ${BARE:-} ]]; then
	go -C "$root/bench" build -o "$dir/bare" ./bare
	GOGC=1600 "$dir/bare" -redis "127.0.0.1:$port" -listen "$listen" >"$dir/server.log" 2>&1 &
else
	go -C "$root" build -o "$dir/limiter" ./cmd/limiter
	LIMITER_LISTEN=$listen LIMITER_DEFAULTS=$root/config/defaults.yaml LIMITER_OVERRIDES=$root/config/overrides.yaml \
		LIMITER_REDIS_BINARY_TATS=$([[ -n ${BINARY:-} ]] && echo true || echo false) \
		"$dir/limiter" serve --source "redis://127.0.0.1:$port" >"$dir/server.log" 2>&1 &
fi
server=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://$listen/" && break; sleep 0.1; done
wrk -t2 -c50 -d3s -s "$root/bench/spend.lua" "http://$listen" >/dev/null
redis-cli -p "$port" config resetstat >/dev/null
read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$rpid/stat")
out=$(wrk -t2 -c50 -d10s -s "$root/bench/spend.lua" "http://$listen")
read -r u2 s2 < <(awk '{print $14, $15}' "/proc/$rpid/stat")
n=$(echo "$out" | awk '/requests in/ {print $1}')
echo "$out" | grep -E 'Requests/sec'
awk -v u=$((u2 - u1)) -v s=$((s2 - s1)) -v n="$n" -v hz="$(getconf CLK_TCK)" \
	'BEGIN { printf "Redis CPU per request: user %.2f µs, system %.2f µs\n", u / hz * 1e6 / n, s / hz * 1e6 / n }'
redis-cli -p "$port" info commandstats | tr -d '\r' | grep -E '^cmdstat_(evalsha|get|set|psetex|incr|del):'
