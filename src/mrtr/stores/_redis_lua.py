"""The Lua scripts of RedisStore (_redis.py): each runs atomically, in one round trip."""

__all__ = [
    "ADD_ONCE",
    "ADMIT",
    "ADMITTED",
    "CLAIM",
    "CLAIM_TRACKED",
    "DISMISS",
    "LAPSED",
    "PUT_NEW",
    "RELEASE",
    "RELEASE_TRACKED",
    "RENEW",
    "RENEW_TRACKED",
]

CLAIM = """
local v = redis.call('GET', KEYS[1])
if v and not (ARGV[2] ~= '' and v == 'r' .. ARGV[2]) then return v end
redis.call('SET', KEYS[1], 'r' .. ARGV[2], 'PX', ARGV[1])
return false
"""
PUT_NEW = """
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""
# KEYS: the set (member -> its deadline), its weights (w:<member> -> weight, t -> their total;
# a set from before weights has none: each member weighs 1). ARGV: now, member, limit, the
# member's deadline (epoch seconds), its weight. Lapsed members go first; both keys live as
# long as the last member. 1 when the member holds a slot.
ADMIT = """
local now, limit, weight = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[5])
local total = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  total = tonumber(redis.call('HGET', KEYS[2], 't') or redis.call('ZCARD', KEYS[1]))
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
for _, m in ipairs(gone) do
  total = total - tonumber(redis.call('HGET', KEYS[2], 'w:' .. m) or '1')
  redis.call('HDEL', KEYS[2], 'w:' .. m)
end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1]) end
local granted = 0
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  local old = tonumber(redis.call('HGET', KEYS[2], 'w:' .. ARGV[2]) or '1')
  if weight <= old or total - old + weight <= limit then
    total = total - old + weight
    redis.call('HSET', KEYS[2], 'w:' .. ARGV[2], weight)
    granted = 1
  end
elseif tonumber(ARGV[4]) > now and total + weight <= limit then
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
  redis.call('HSET', KEYS[2], 'w:' .. ARGV[2], weight)
  total = total + weight
  granted = 1
end
if granted == 0 and #gone == 0 then return 0 end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
  return granted
end
redis.call('HSET', KEYS[2], 't', total)
local last = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
local ms = math.max(1, math.ceil((last - now) * 1000))
redis.call('PEXPIRE', KEYS[1], ms)
redis.call('PEXPIRE', KEYS[2], ms)
return granted
"""
DISMISS = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  local t = redis.call('HGET', KEYS[2], 't')
  if t then
    local w = tonumber(redis.call('HGET', KEYS[2], 'w:' .. ARGV[1]) or '1')
    redis.call('HSET', KEYS[2], 't', tonumber(t) - w)
  end
  redis.call('HDEL', KEYS[2], 'w:' .. ARGV[1])
end
return 0
"""
# The live members' total weight: the stored total less the lapsed members' weights.
ADMITTED = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local total = tonumber(redis.call('HGET', KEYS[2], 't') or redis.call('ZCARD', KEYS[1]))
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])) do
  total = total - tonumber(redis.call('HGET', KEYS[2], 'w:' .. m) or '1')
end
return total
"""
RENEW = """
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'r' then return redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return 0
"""
RELEASE = """
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'r' and (ARGV[1] == '1' or v == 'r' .. ARGV[2]) then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
# A token applied once per counter: SET NX is the idempotency record, in the same script as the
# INCRBY, so a crash can never split them.
ADD_ONCE = """
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then
  local v = redis.call('INCRBY', KEYS[1], ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return v
end
return tonumber(redis.call('GET', KEYS[1]) or '0')
"""

# Tracked leases: an index is two sorted sets of unprefixed keys, one scored by the end of each
# key's lease (`ix:`), one by its deadline (`ixe:`). KEYS: the entry, the two sets. ARGV: the
# lease in ms, its end and the deadline (epoch seconds), the unprefixed key.
CLAIM_TRACKED = """
local v = redis.call('GET', KEYS[1])
if v and not (ARGV[5] ~= '' and v == 'r' .. ARGV[5]) then return v end
redis.call('SET', KEYS[1], 'r' .. ARGV[5], 'PX', ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[4])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
return false
"""
RENEW_TRACKED = """
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'r' then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  redis.call('ZADD', KEYS[2], 'XX', ARGV[2], ARGV[3])
  return 1
end
return 0
"""
RELEASE_TRACKED = """
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'r' and (ARGV[2] == '1' or v == 'r' .. ARGV[3]) then
  redis.call('DEL', KEYS[1])
end
return 0
"""
# KEYS: the two sets. ARGV: now, limit, the store's prefix. Expired keys leave first (a bounded
# number per call); a key found done leaves; one held (renewed without the index) moves to the
# end of its lease; an absent one lapsed: it is listed, and stays.
LAPSED = """
local now = tonumber(ARGV[1])
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, 256)) do
  redis.call('ZREM', KEYS[1], m)
  redis.call('ZREM', KEYS[2], m)
end
local found = {}
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(due) do
  local v = redis.call('GET', ARGV[3] .. m)
  if not v then
    table.insert(found, m)
  elseif string.sub(v, 1, 1) == 'r' then
    redis.call('ZADD', KEYS[1], now + redis.call('PTTL', ARGV[3] .. m) / 1000, m)
  else
    redis.call('ZREM', KEYS[1], m)
    redis.call('ZREM', KEYS[2], m)
  end
end
return found
"""
