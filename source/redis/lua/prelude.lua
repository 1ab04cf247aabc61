-- Bucket script of the limiter's Redis source, key formats v1 and v2
-- (docs/redis.md). The Go side builds every call in one place, encode.go,
-- whose doc comment states this same layout.
--
-- One call decides and writes the buckets named in KEYS atomically: Redis
-- runs a script to completion before any other command, so two calls on
-- the same buckets behave as if one ran fully before the other.
--
-- A bucket holds one of three things. A GCRA bucket holds its TAT (unix
-- nanoseconds) as a decimal integer string. A window limit's bucket
-- (sliding or fixed window) holds its counter as one string
-- '<period>:<index>:<cur>:<prev>': the period in milliseconds, the index of
-- the window cur counts (its start is index * period unix ms), the hits of
-- that window and the hits of the one before it, all decimal integers,
-- e.g. '60000:29833334:17:40'. The ':' tells the two apart. A GCRA or
-- window op reads a value of the other as empty (a limit whose algorithm
-- changed starts afresh), and anything else is refused with an error. A
-- rate counter holds its hits per second, packed in binary (see rparse).
-- A penalty box's entry, kept beside its id's buckets, holds its expiry
-- (unix ns) as a decimal integer, and expires from Redis a margin after
-- it.
--
-- Lua numbers are doubles, exact only up to 2^53, and unix nanoseconds are
-- near 2^61. Every time is therefore held as two limbs (hi, lo) with
-- value = hi * 1e9 + lo, 0 <= lo < 1e9, and |hi| < 2^35: each limb is an
-- integer-valued double far from 2^53, so every sum, difference and
-- comparison below is exact. The service passes its own "now" (the script
-- never reads TIME), so a fake clock drives these decisions too. Window
-- arithmetic is in whole milliseconds, now_ms = floor(now / 1e6), below
-- 2^44 in magnitude; with count * period <= 2^53 - 1 (the config's bound)
-- and counts kept at or below 2^53 - 1, every window product is exact or,
-- where a stored count exceeds the limit's count, correctly above
-- anything it is compared with (see wspend).
--
-- Every call starts with the same three arguments:
--
-- ARGV[1]        operation: S spend (and write when allowed), C spend
--                as part of a batch denied elsewhere (decide, and write
--                only what a denied batch writes: a rate counter's hits
--                and box entries; nothing for GCRA and window ops), R
--                refund, D reset, A add hits to window counters (sync),
--                E an Edge Rate Limiting call, Y add hits to rate
--                counters and expiries to box entries (sync), O a spend
--                or refund under an idempotency record, Q claim an
--                idempotency key, M and P several batches in one call (all
--                described below)
-- ARGV[2]        expiry margin in whole milliseconds
-- ARGV[3]        key format: 1 (a key per bucket) or 2 (buckets are
--                fields of shared hashes)
--
-- S, C, R, D, A: KEYS are the batch's buckets, ARGV[4], [5] is now as
-- (hi, lo), and then per key, in order:
--   S, C: a GCRA op: 3 values, its mode (0 check-and-spend, 1 check-only,
--         2 spend-only), the increment EI*cost, the burst offset;
--         a window op: 4 values, its token ('W0', 'W1', 'W2' for a
--         sliding window in mode 0, 1, 2; 'F0' to 'F2' for a fixed one),
--         its cost, the limit's count, its period in ms;
--         a rate counter: 4 values, its token ('R0' to 'R2' for mode 0
--         to 2), its cost, its window in seconds (1, 10 or 60), its rate
--   R: a GCRA op: 1 value, the decrement (0 for check-only);
--      a window op: 3 values, 'W' or 'F', the hits to give back (0 for
--      check-only), the period;
--      a rate counter: 2 values, 'T' and the hits to give back
--   D: 1 value: 'G' for a GCRA bucket, or 'W' or 'F' followed by the
--      period ('W60000'), or 'T' for a rate counter
--   A: 4 values: the period, the index of the window the hits count in,
--      its hits, and the hits of the window before it
-- An op with a penalty box (every rate counter; a GCRA or window op of a
-- limit with a penalty) has more values before its own: in S and C,
-- 'BOX', its box entry's name and the expiry (unix ns) an id it boxes
-- gets; in R and D, 'BOX' and the name. Box entries are named in ARGV, not
-- declared: the service names each in its key's slot (its id's hash tag).
-- An op without a box has no more values, and takes the same path as
-- before boxes existed.
-- Numbers are decimal strings; the script splits int64s into limbs
-- itself, so each costs one argument (Redis spends a fair share of a call
-- on every argument it parses). A batch may mix GCRA and window ops.
--
-- Reply of S, C and R: {verdict, v_1, ..., v_n}, verdict 1 when the batch
-- is allowed (always 1 for R), v_i the value stored under key i before the
-- call, as stored, or "" when there was none (or, for a GCRA op, a full
-- bucket or a window counter); for an op with a box, its box entry's
-- value ("" for none), a space, and that. The service recomputes every
-- outcome from these values with the same functions the memory source
-- uses. E and Y are described at call and rsync. Reply of
-- D: how many buckets still counted something (a GCRA bucket not full, a
-- window counter with hits that count at now). Reply of A: {1, v_1, ...,
-- v_n}, v_i the counter stored after the add ("" when it counts nothing,
-- or is of another period).
--
-- M packs several independent batches into one call, so that concurrent
-- batches to one Redis share its per-call cost (on a cluster, see P).
-- KEYS holds the batches' keys one after another; after the header, ARGV
-- holds per batch its operation, its number of keys, its now as (hi, lo)
-- and its values per key as above, except that a one-key GCRA spend is
-- folded (see FOLD_OP below): 'S0' to 'C2' for its operation and mode,
-- its now, its increment and its burst offset. Each batch is decided
-- exactly as alone, under its own "now". The reply is the batches'
-- replies one after another in one flat list (a table per batch would cost
-- Redis more than the list): 1 + n items for an S, C, R or A batch of n
-- keys, 1 for a D batch. A batch that fails (say on a key that holds
-- neither a TAT nor a counter) answers its own error, then n empty strings
-- for an S, C, R or A batch, without touching the others. The whole call
-- is still one atomic script run.
--
-- P is M for a cluster node, where the keys of one call may only be
-- declared in KEYS when they share a slot. KEYS is empty, and each batch
-- carries its keys in ARGV, after its size: operation, n, n keys, now as
-- (hi, lo), values; folded, the token, the key, now, the two values.
-- Redis lets a script without flags reach undeclared keys of any slot the
-- node serves, and refuses a command on a key of another node's slot (one
-- that moved since the caller looked) with an error. The service packs
-- only one-key batches this way, so such a batch fails at its first
-- command on its key, having changed nothing, and is sent again alone. One
-- exception, while the slot migrates: a key still here but full is read
-- and deleted, and then the write of its new TAT is refused (the key is
-- gone from a migrating slot). That changes no answer: a full bucket and
-- a missing one are the same, and the call sent again starts from that.

local B = 1000000000
local MAX_HI, MAX_LO = 9223372036, 854775807 -- math.MaxInt64
-- MAXC is 2^53 - 1, the largest count a window counter holds: every
-- integer up to it is exact in a double.
local MAXC = 9007199254740991

-- Key format (ARGV[3]). In v1 every bucket is a key of its own, holding
-- its TAT. In v2 a bucket is a field of a hash that many buckets share (its
-- group), and the name the service passes for it, declared or not, is the
-- hash's name followed by the field: 'lim:v2:{12345}3:alice' is field
-- '3:alice' of hash 'lim:v2:{12345}'. The name has the hash's slot (its
-- hash tag is the group), so Redis Cluster routes and checks it as it
-- would the hash.
local GROUPED = ARGV[HEAD_FORMAT] == '2'
if not GROUPED and ARGV[HEAD_FORMAT] ~= '1' then
  error('limiter: unknown key format ' .. tostring(ARGV[HEAD_FORMAT]))
end

-- A v2 hash is swept of its full buckets when a new field brings it to
-- SWEEP_AT fields, and after that whenever it has grown to twice the
-- fields its last sweep left (recorded in its field ''), so a sweep's
-- cost is shared by as many new fields as the hash held, and a hash never
-- holds much more than twice its buckets that are not full, or SWEEP_AT.
local SWEEP_AT = 32

-- The batch being decided: its "now" (set by run), and the margin.
local now_hi, now_lo, margin

-- ext holds the functions that only some calls need: those of window
-- counters (see the header for their layout), of sync, and of a failed
-- packed batch. ext_make makes them on first use (ext or ext_make()).
-- Redis makes every function of this script afresh on each call, and each
-- one made, with every variable it shares with the rest of the script,
-- costs it time that a call of GCRA spends should not pay.
local ext, ext_make

