-- words splits a record into its space-separated words.
local function words(s)
  local w, n = {}, 0
  for x in string.gmatch(s, '%S+') do
    n = n + 1
    w[n] = x
  end
  return w, n
end

-- live reports whether a record whose expiry is the decimal string e still
-- answers at now (now_hi, now_lo set by the caller).
local function live(e)
  local eh, el = split(e)
  return lt(now_hi, now_lo, eh, el)
end

-- O decides one spend or refund batch and records its answer, in this one
-- script run, so that a retry with the same idempotency key is answered
-- from the record and never decided twice. KEYS: the batch's keys, then
-- the record's key (on a cluster, in the batch's slot). ARGV after the
-- header: the batch's operation (S or R), the request's fingerprint, the
-- record's expiry in unix nanoseconds, the record key's lifetime in
-- milliseconds, now as (hi, lo), then the batch's values as for S or R.
--
-- A record is one string of words: the fingerprint, the expiry, the now
-- of the call, its verdict, and the value read of each key, a TAT (as
-- decimal text, whichever form it is stored in) or a window counter
-- ('-' for none, or a full bucket), from which the service
-- computes the first call's outcomes again. A record whose expiry has
-- come answers nothing.
--
-- Reply: {0, '', verdict, v_1..v_n} when decided now; {1, now, verdict,
-- v_1..v_n} when answered from the record (now: the first call's); {2}
-- when the record's fingerprint is another request's.
local function once()
  local n = #KEYS - 1
  local rkey = KEYS[n + 1]
  local fp = ARGV[ONCE_FINGERPRINT]
  now_hi, now_lo = count(ARGV[ONCE_NOW + NOW_HI]), tonumber(ARGV[ONCE_NOW + NOW_LO])
  local old = redis.call('GET', rkey)
  if old then
    local w, m = words(old)
    if live(w[2]) then
      if w[1] ~= fp or m ~= n + 4 then
        return { 2 }
      end
      local out = { 1, w[3], tonumber(w[4]) }
      for i = 1, n do
        local t = w[4 + i]
        if t == '-' then
          t = ''
        end
        out[3 + i] = t
      end
      return out
    end
  end
  local reply, _, tat = run(ARGV[ONCE_OP], KEYS, 0, n, ONCE_NOW)
  if tat then
    reply = { reply, tat }
  end
  local rec = { fp, ARGV[ONCE_EXPIRES], format(now_hi, now_lo), tostring(reply[1]) }
  local out = { 0, '', reply[1] }
  for i = 1, n do
    local t = reply[i + 1]
    out[3 + i] = t
    if t == '' then
      t = '-'
    elseif #t == 10 and string.byte(t, 1) == 84 then
      t = format(parse('', t)) -- a binary TAT: a record's words are text
    end
    rec[4 + i] = t
  end
  redis.call('SET', rkey, table.concat(rec, ' '), 'PX', ARGV[ONCE_LIFETIME])
  return out
end

-- Q claims an idempotency key for a Redis Cluster batch whose record
-- cannot share a slot with all of its buckets. KEYS[1]: the claim's key.
-- ARGV after the header: the fingerprint, the expiry, the key's lifetime
-- in milliseconds, now as (hi, lo). A live claim is returned as it is (a
-- record, or the fingerprint and expiry followed by P while its call has
-- no known outcome); otherwise a pending claim is made and nil returned.
local function claim()
  now_hi, now_lo = count(ARGV[CLAIM_NOW + NOW_HI]), tonumber(ARGV[CLAIM_NOW + NOW_LO])
  local old = redis.call('GET', KEYS[1])
  if old and live(words(old)[2]) then
    return old
  end
  redis.call('SET', KEYS[1], ARGV[CLAIM_FINGERPRINT] .. ' ' .. ARGV[CLAIM_EXPIRES] .. ' P', 'PX', ARGV[CLAIM_LIFETIME])
  return false
end

