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
# one-key GCRA spend, folded (S0); window a one-key spend of a sliding
# window of 100 hits a minute; check_rate a spend of one hit on a rate
# counter of 100 a second over 10 s with its box, as the source sends
# POST /v1/erl/check_rate (ratelimits.checkRateAsSpend); erl_call the same
# as an Edge Rate Limiting call (operation E), as check_rates sends it.
# PACK=0 sends each
# decision as a call of its own, in its own operation, as the source does
# for a call that finds nothing queued. With GROUPED=1 the calls ask for
# key format v2 (ARGV[3] = 2) and the buckets are fields of 1,000 hashes.
#
# CPU=1 measures seconds instead of instructions: Redis's CPU (utime +
# stime, /proc/PID/stat) per decision under 50 clients each sending one
# call at a time, Redis pinned to CPU 1 and redis-benchmark to CPU 0 so that
# neither slows the other, beside the same load of two references: one
# INCR per request (the bare + INCR row of bench/harness), and a script
# that only reads and writes each of its keys (GET, then SET … KEEPTTL,
# 10 a call): the least any script deciding from a stored value costs.
# Each is measured ROUNDS times (default 3), alternating; the medians are
# printed with their ratios to INCR.
# Needs valgrind (not with CPU=1), redis-server, redis-cli, redis-benchmark.
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

mode=${MODE:-gcra}
increment=${INCREMENT:-36000000000} burst=${BURST:-3600000000000}
pack=${PACK:-10}
format=$([[ -n ${GROUPED:-} ]] && echo 2 || echo 1)
[[ -z ${BINARY:-} ]] || format+=b # as --redis-binary-tats asks
batches=$pack
((batches > 0)) || batches=1
now=(1790000000 123456789)
keys=() argv=()
if ((pack > 0)); then
	argv=(M 60000 "$format") # the packed call's header: operation, expiry margin (ms), key format
fi
for b in $(seq "$batches"); do
	if [[ $mode == erl_call ]]; then
		# a counter and its box entry, both tagged by the id
		if [[ -n ${GROUPED:-} ]]; then
			keys+=("lim:v2:{__rand_int__}7:ip-$b" "lim:v2:{__rand_int__}!7:ip-$b")
		else
			keys+=("lim:v1:{ip-$b-__rand_int__}7" "lim:v1:{ip-$b-__rand_int__}7!")
		fi
	elif [[ $mode == check_rate && -n ${GROUPED:-} ]]; then
		keys+=("lim:v2:{__rand_int__}7:ip-$b")
	elif [[ $mode == check_rate ]]; then
		keys+=("lim:v1:{ip-$b-__rand_int__}7")
	elif [[ -n ${GROUPED:-} ]]; then
		keys+=("lim:v2:{__rand_int__}3:key-$b")
	else
		keys+=("lim:v1:{3:key-$b-__rand_int__}")
	fi
	case $mode in
	gcra)
		# a one-key spend of mode 0, folded as the source packs it (S0), now
		# as (seconds, nanoseconds), increment 36 s, burst offset 1 h (or
		# INCREMENT and BURST, in ns)
		if ((pack > 0)); then
			argv+=(S0 "${now[@]}" "$increment" "$burst")
		else
			argv+=(S 60000 "$format" "${now[@]}" 0 "$increment" "$burst")
		fi
		;;
	window)
		# operation S of one key, now, then the op: W0, cost, count, period
		if ((pack > 0)); then
			argv+=(S 1 "${now[@]}" W0 1 100 60000)
		else
			argv+=(S 60000 "$format" "${now[@]}" W0 1 100 60000)
		fi
		;;
	check_rate)
		# operation S of one key, now, its box (BOX, the entry's name, the
		# expiry it gives: now + 1 min), then the op: R0, cost, window, rate
		if [[ -n ${GROUPED:-} ]]; then
			box="lim:v2:{__rand_int__}!7:ip-$b"
		else
			box="lim:v1:{ip-$b-__rand_int__}7!"
		fi
		if ((pack > 0)); then
			argv+=(S 1 "${now[@]}" BOX "$box" 1790000060123456789 R0 1 10 100)
		else
			argv+=(S 60000 "$format" "${now[@]}" BOX "$box" 1790000060123456789 R0 1 10 100)
		fi
		;;
	erl_call)
		# operation E of two keys, now, one counter (delta 1, window 10 s,
		# rate 100), box action A and the expiry it gives (now + 1 min)
		if ((pack > 0)); then
			argv+=(E 2 "${now[@]}" 1 1 10 100 A 1790000060123456789)
		else
			argv+=(E 60000 "$format" "${now[@]}" 1 1 10 100 A 1790000060123456789)
		fi
		;;
	*)
		echo "unknown MODE $mode (gcra, window, check_rate, erl_call)" >&2
		exit 2
		;;
	esac
done
redis-benchmark -p "$port" -n 2000 -r 1000 -P 10 -c 1 EVALSHA "$sha" "${#keys[@]}" "${keys[@]}" "${argv[@]}" >/dev/null
if [[ -n ${CPU:-} ]]; then
	hz=$(getconf CLK_TCK)
	n=$((calls * 50)) # requests per measure
	cpu() { awk '{print $14 + $15}' "/proc/$vpid/stat"; }
	# usage NAME DECISIONS-PER-REQUEST COMMAND...: Redis CPU µs per decision
	usage() {
		local name=$1 per=$2 a b
		shift 2
		a=$(cpu)
		taskset -c 0 redis-benchmark -p "$port" -n "$n" -r 1000 -c 50 -P 1 "$@" >/dev/null
		b=$(cpu)
		echo "$name $(awk -v t=$((b - a)) -v hz="$hz" -v n="$n" -v per="$per" 'BEGIN { printf "%.3f", t / hz * 1e6 / (n * per) }')" >>"$dir/cpu"
	}
	minimal='local r = {} for i = 1, #KEYS do r[i] = redis.pcall("GET", KEYS[i]) or "" redis.pcall("SET", KEYS[i], ARGV[i], "KEEPTTL") end return r'
	msha=$(redis-cli -p "$port" script load "$minimal")
	mkeys=() mvals=()
	for b in $(seq 10); do mkeys+=("min:$b:__rand_int__") mvals+=(1790000000133456789); done
	for _ in $(seq "${ROUNDS:-3}"); do
		usage incr 1 INCR "incr:__rand_int__"
		usage minimal 10 EVALSHA "$msha" 10 "${mkeys[@]}" "${mvals[@]}"
		usage script "$batches" EVALSHA "$sha" "${#keys[@]}" "${keys[@]}" "${argv[@]}"
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
redis-benchmark -p "$port" -n "$calls" -r 1000 -P 10 -c 1 EVALSHA "$sha" "${#keys[@]}" "${keys[@]}" "${argv[@]}" >/dev/null
callgrind_control -d "$vpid" >/dev/null 2>&1 # part 2: the measured calls
sleep 1
ir=$(awk '/^summary:/ {print $2; exit}' "$dir/cg.out.2")
redis-cli -p "$port" info commandstats | grep -E 'cmdstat_(evalsha|get|set|psetex|mget):' | tr -d '\r'
if [[ -n ${ANNOTATE:-} ]]; then
	callgrind_annotate --inclusive=yes "$dir/cg.out.2" | head -"${ANNOTATE}"
fi
echo "$mode instructions per decision: $((ir / (calls * batches))) ($ir for $calls calls of $batches)"
