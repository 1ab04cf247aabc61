margin = tonumber(ARGV[HEAD_MARGIN])
step = math.max(1, math.floor(margin / 2))
local op = ARGV[HEAD_OP]
if op == 'O' then
  return once()
elseif op == 'Q' then
  return claim()
end
if op ~= 'M' and op ~= 'P' then
  local reply, _, tat = run(op, KEYS, 0, #KEYS, HEAD_SIZE + 1)
  if tat then
    return { reply, tat }
  end
  return reply
end
-- In a packed call a one-key spend comes folded: one token for its
-- operation and mode ('S0' to 'C2') in place of operation, size and mode,
-- and then, after its now, only its increment and burst offset. Two
-- arguments fewer for the commonest batch: Redis parses and copies every
-- argument into ARGV.
local FOLD_OP = { S0 = 'S', S1 = 'S', S2 = 'S', C0 = 'C', C1 = 'C', C2 = 'C' }
local FOLD_MODE = { S0 = '0', S1 = '1', S2 = '2', C0 = '0', C1 = '1', C2 = '2' }
local inline = op == 'P'
-- The batches fast.lua decided, if any, and where the rest start.
local replies, r = fast_replies or {}, fast_r or 0
local k, a = fast_k or 0, fast_a or HEAD_SIZE + 1
while a <= #ARGV do
  -- A batch's first argument is its folded token (FTOKEN_TOKEN) or its
  -- operation (PACK_OP).
  local t = ARGV[a + FTOKEN_TOKEN]
  local bop, mode, n = FOLD_OP[t], FOLD_MODE[t], 1
  -- K, k: where the batch's keys are; v: where its now starts.
  local K, v = KEYS, a + FTOKEN_SIZE
  if bop then
    if inline then
      K, k, v = ARGV, a + (FTOKEN_SIZE - 1), a + (FTOKEN_SIZE + 1)
    end
  else
    bop, n, v = t, count(ARGV[a + PACK_KEYS]), a + PACK_SIZE
    if inline then
      K, k, v = ARGV, a + (PACK_SIZE - 1), a + PACK_SIZE + n
    end
  end
  local ok, reply, used, tat = pcall(run, bop, K, k, n, v, mode)
  if ok then
    r = r + 1
    replies[r] = reply
    if tat then
      r = r + 1
      replies[r] = tat
    elseif type(reply) == 'table' then
      r = r - 1
      for i = 1, #reply do
        replies[r + i] = reply[i]
      end
      r = r + #reply
    end
  else
    if type(reply) ~= 'table' then
      reply = redis.error_reply(tostring(reply))
    end
    r = r + 1
    replies[r] = reply
    -- The batch's size is known without running it, so the batches after
    -- a failed one are still found, and its reply keeps its width.
    local w = 0
    if bop == 'S' or bop == 'C' or bop == 'R' or bop == 'A' then
      w = n
    elseif bop == 'Y' then
      w = 2 * n
    elseif bop == 'E' then
      w = 2 + count(ARGV[v + NOW_SIZE + CALL_COUNTERS])
    end
    for i = 1, w do
      replies[r + i] = ''
    end
    r = r + w
    if mode then
      used = FOLDED_SIZE
    else
      used = (ext or ext_make()).span(bop, v + NOW_SIZE, n)
    end
  end
  if inline then
    a = v + NOW_SIZE + used
  else
    k, a = k + n, v + NOW_SIZE + used
  end
end
return replies
