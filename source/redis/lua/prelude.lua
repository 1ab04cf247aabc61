-- Bucket script of the limiter's Redis source, key formats v1 and v2
-- (docs/redis.md), in parts joined in the order script.go lists. The Go
-- side builds every call in one place, encode.go.
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
-- rate counter holds its hits per second, packed in binary (see rparse),
-- and a concurrency limit's bucket its lease set, 'L' and its leases (see
-- leases.lua); each algorithm reads the others' values as empty.
-- A penalty box's entry, kept beside its id's buckets, holds its expiry
-- (unix ns) as a decimal integer, and expires from Redis at its deadline,
-- as a TAT does (see deadline in store.lua).
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
-- The arguments of every operation, and its reply, are described once in
-- docs/redis.md, "The script's arguments"; their positions are declared
-- in protocol.go, and read here by the names lua/protocol.lua lists.
--
-- On a cluster node (operation P) the keys of a batch are passed in ARGV,
-- undeclared. Redis lets a script without flags reach undeclared keys of
-- any slot the node serves, and refuses a command on a key of another
-- node's slot (one that moved since the caller looked) with an error. The
-- service packs only one-key batches this way, so such a batch fails at
-- its first command on its key, having changed nothing, and is sent again
-- alone. One exception, while the slot migrates: a key still here but
-- full is read and deleted, and then the write of its new TAT is refused
-- (the key is gone from a migrating slot). That changes no answer: a full
-- bucket and a missing one are the same, and the call sent again starts
-- from that.

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
--
-- The same argument, followed by 'b', asks for TATs written in binary
-- (see parse in limbs.lua); either way the script reads both forms.
local GROUPED = ARGV[HEAD_FORMAT] == '2' or ARGV[HEAD_FORMAT] == '2b'
local BINARY = ARGV[HEAD_FORMAT] == '1b' or ARGV[HEAD_FORMAT] == '2b'
if not GROUPED and not BINARY and ARGV[HEAD_FORMAT] ~= '1' then
  error('limiter: unknown key format ' .. tostring(ARGV[HEAD_FORMAT]))
end

-- A v2 hash is swept of its full buckets when a new field brings it to
-- SWEEP_AT fields, and after that whenever it has grown to twice the
-- fields its last sweep left (recorded in its field ''), so a sweep's
-- cost is shared by as many new fields as the hash held, and a hash never
-- holds much more than twice its buckets that are not full, or SWEEP_AT.
local SWEEP_AT = 32

-- The batch being decided: its "now" (set by run), the margin, and the
-- step its keys' deadlines are rounded up to (see deadline).
local now_hi, now_lo, margin, step

-- ext holds the functions that only some calls need: those of window
-- counters (see the header for their layout), of sync, and of a failed
-- packed batch. ext_make makes them on first use (ext or ext_make()).
-- Redis makes every function of this script afresh on each call, and each
-- one made, with every variable it shares with the rest of the script,
-- costs it time that a call of GCRA spends should not pay.
local ext, ext_make

