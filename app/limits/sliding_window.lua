-- Sliding window counter, in one call: take AMOUNT from the window unless that would pass
-- LIMIT, and report the window as it stands afterwards (the X-RateLimit headers need it,
-- and reading it here saves a second round trip).
--
-- KEYS[1]: the previous window's counter, KEYS[2]: the current window's counter.
-- ARGV[1]: LIMIT, ARGV[2]: the window in seconds, ARGV[3]: AMOUNT (0 only reads).
-- Reply: {taken (1 or 0), previous count, its ttl in ms, current count, its ttl in ms}.
-- The current counter lives two windows; once only one window of its life is left, the
-- current window is over, so it becomes the previous one and a new one starts at zero.

local limit = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2]) * 1000
local amount = tonumber(ARGV[3])

local function ttl_of(key)
    local ttl = redis.call('pttl', key)
    if ttl < 0 then
        return 0
    end
    return ttl
end

local current_ttl = ttl_of(KEYS[2])
if current_ttl > 0 and current_ttl < window_ms then
    redis.call('rename', KEYS[2], KEYS[1])
    redis.call('set', KEYS[2], 0, 'PX', current_ttl + window_ms)
    current_ttl = current_ttl + window_ms
end

local previous = tonumber(redis.call('get', KEYS[1])) or 0
local previous_ttl = ttl_of(KEYS[1])
local current = tonumber(redis.call('get', KEYS[2])) or 0

local taken = 0
local weighted = math.floor(previous * previous_ttl / window_ms) + current
if amount > 0 and amount <= limit and weighted + amount <= limit then
    taken = 1
    if current_ttl > 0 then
        current = redis.call('incrby', KEYS[2], amount)
    else
        redis.call('set', KEYS[2], amount, 'PX', window_ms * 2)
        current = amount
        current_ttl = window_ms * 2
    end
end

return {taken, previous, previous_ttl, current, current_ttl}
