package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts that change the shared state. Each runs atomically in
// Redis, so transitions are decided once for the whole fleet. Scripts run
// with EVALSHA and fall back to EVAL when Redis does not know them yet
// (after a restart, for instance).
//
// Times are milliseconds on Redis's clock (TIME; see scriptTime); amounts
// of tokens are integer millionths. Lua numbers are doubles, exact up to 2^53, which
// holds both. Integers are written back with %d so that no digit is lost to
// Lua's default number format.

// breakerLib is the part shared by the breaker scripts. The state hash
// holds st (0 closed, 1 half-open, 2 open), gen (changes on every
// transition; starts at the time the state was created), until (end of the
// open period), trips (open periods since the breaker last closed), consec
// (failures in a row, consecutive condition), succ (successful probes in
// the half-open state) and r, s, f, l (requests, successes, failures and
// slow calls since the state began, consecutive condition). The probes
// sorted set holds the probe permits of the half-open state, scored by the
// end of their lease.
const breakerLib = `
-- clock returns the scripts' now in ms: Redis's TIME, unless the caller
-- passed a time of its own on Redis's time line (an anchored test clock).
local function clock(arg)
  local n = tonumber(arg)
  if n and n >= 0 then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function load(key, now)
  local v = redis.call('HMGET', key, 'st', 'gen', 'until', 'trips', 'consec', 'succ', 'r', 's', 'f', 'l', 'epoch', 'born')
  if not v[1] then
    local tm = redis.call('TIME')
    return {st = 0, gen = now, untl = 0, trips = 0, consec = 0, succ = 0, r = 0, s = 0, f = 0, l = 0,
            epoch = tonumber(tm[1]) * 1000000 + tonumber(tm[2]), born = now}, true
  end
  return {st = tonumber(v[1]), gen = tonumber(v[2]), untl = tonumber(v[3]), trips = tonumber(v[4]),
          consec = tonumber(v[5]), succ = tonumber(v[6]), r = tonumber(v[7]) or 0, s = tonumber(v[8]) or 0,
          f = tonumber(v[9]) or 0, l = tonumber(v[10]) or 0, epoch = tonumber(v[11]) or 0,
          born = tonumber(v[12]) or -1}, false
end

local function save(key, b, ttl)
  redis.call('HSET', key, 'st', b.st, 'gen', string.format('%d', b.gen), 'until', string.format('%d', b.untl),
             'trips', b.trips, 'consec', b.consec, 'succ', b.succ,
             'r', string.format('%d', b.r), 's', string.format('%d', b.s),
             'f', string.format('%d', b.f), 'l', string.format('%d', b.l),
             'epoch', string.format('%d', b.epoch), 'born', string.format('%d', b.born))
  redis.call('PEXPIRE', key, ttl)
end

-- lostState reports whether the state hash is not the one the caller last
-- saw (epoch known, 0 if none): Redis lost it (restart, FLUSHALL,
-- eviction, failover) and made a new one.
local function lostState(key, known)
  if known == 0 then return false end
  local e = redis.call('HGET', key, 'epoch')
  return not e or tonumber(e) ~= known
end

local function reset(b, pkey, st)
  b.st = st
  b.gen = b.gen + 1
  b.consec, b.succ, b.r, b.s, b.f, b.l = 0, 0, 0, 0, 0, 0
  redis.call('DEL', pkey)
end

-- open starts the next open period: base * mult^(trips-1), capped at maxo,
-- shortened by jitter * rnd of itself.
local function open(b, pkey, now, base, maxo, mult, jitter, rnd)
  b.trips = b.trips + 1
  local d = base
  for i = 2, b.trips do
    if d >= maxo then break end
    d = math.min(d * mult, maxo)
  end
  d = math.floor(d - jitter * rnd * d)
  if d < 1 then d = 1 end
  reset(b, pkey, 2)
  b.untl = now + d
end

local function expire(b, pkey, now)
  if b.st == 2 and now >= b.untl then
    reset(b, pkey, 1)
    return true
  end
  return false
end

local function inuse(pkey, now)
  redis.call('ZREMRANGEBYSCORE', pkey, '-inf', now)
  return redis.call('ZCARD', pkey)
end
`

// syncScript applies one process's batch of outcomes and returns the state.
//
// KEYS: state, probes, seen (this process's last batch number). The window
// buckets (time-window condition) are "<window prefix><generation>:<bucket>",
// in the same hash slot.
// ARGV: now (-1: TIME), gen, requests, successes, failures, slow, saw (1 if a
// success came in the batch), lead, longest and trail (the batch's
// leading, longest and trailing runs of failures), window (1: time-window
// condition), consecutive limit, minCalls, failPct, slowPct, open base,
// open max, multiplier, jitter, rnd, ttl, bucket ttl, maxProbes, anygen
// (1: the batch holds outcomes counted before the process first joined the
// shared state, and applies to the current closed state whatever its
// generation), trip (1: the process's local breaker opened: open the
// closed breaker the batch counts toward), window
// prefix, bucket width, buckets, seq (the batch's number: a batch whose
// number is not above the last one applied for this process is a replay,
// and changes nothing).
// Returns: st, gen, until, probes in use, requests, successes, failures,
// slow, consec, now, epoch, carried (1: the state is closed and outcomes
// of generation gen count toward it: it is that state, or stands in for
// it). ARGV 30-32: the epoch of the state the caller
// last saw (0: none), the state it saw (0 closed, 1 half-open, 2 open) and
// the rest of its open period (ms): if Redis lost that state, a new closed
// one is set back to it.
//
// A batch counts toward the closed state of generation gen only (as a
// result of an earlier generation is ignored in Go), or toward any closed
// state with anygen. When Redis lost the state the caller saw closed, the
// new closed state stands in for it until its first transition.
var syncScript = redis.NewScript(breakerLib + `
local now, cgen = clock(ARGV[1]), tonumber(ARGV[2])
local req, suc, fai, slo = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local saw, lead, longest, trail = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local win, limit, minc = ARGV[11] == '1', tonumber(ARGV[12]), tonumber(ARGV[13])
local fpct, spct = tonumber(ARGV[14]), tonumber(ARGV[15])
local ttl, bttl, maxp = tonumber(ARGV[21]), tonumber(ARGV[22]), tonumber(ARGV[23])
local anygen, ltrip = ARGV[24] == '1', ARGV[25] == '1'
local wprefix, width, nb = ARGV[26], tonumber(ARGV[27]), tonumber(ARGV[28])
local seq = tonumber(ARGV[29])
if req + suc + fai + slo + longest + saw > 0 or ltrip then
  if seq <= tonumber(redis.call('HGET', KEYS[3], 'seq') or '0') then
    req, suc, fai, slo, saw, lead, longest, trail, ltrip = 0, 0, 0, 0, 0, 0, 0, 0, false -- a replay
  else
    redis.call('HSET', KEYS[3], 'seq', string.format('%d', seq))
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
end

local known, held, rem = tonumber(ARGV[30]), tonumber(ARGV[31]), tonumber(ARGV[32])
local b, fresh = load(KEYS[1], now)
local dirty = fresh
if b.epoch == 0 then
  -- a state written before epochs existed: give it one
  local tm = redis.call('TIME')
  b.epoch = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
  dirty = true
end
local lost = known ~= 0 and known ~= b.epoch
if lost and b.st == 0 and b.gen == b.born and held > 0 then
  -- Redis lost the state this process saw open or half-open, and made a
  -- closed one: restore what the process saw.
  reset(b, KEYS[2], held)
  b.trips = 1
  if held == 2 then b.untl = now + math.max(rem, 1) end
  dirty = true
end
if expire(b, KEYS[2], now) then dirty = true end

local r, s, f, l = b.r, b.s, b.f, b.l
local current = b.st == 0 and (anygen or (not lost and b.gen == cgen) or (lost and held == 0 and b.gen == b.born))
local trip = false
if win then
  r, s, f, l = 0, 0, 0, 0
  if b.st == 0 then
    local idx = math.floor(now / width)
    local wp = wprefix .. string.format('%d', b.gen) .. ':'
    if current and req + suc + fai + slo > 0 then
      local k = wp .. string.format('%d', idx)
      redis.call('HINCRBY', k, 'r', req)
      redis.call('HINCRBY', k, 's', suc)
      redis.call('HINCRBY', k, 'f', fai)
      redis.call('HINCRBY', k, 'l', slo)
      redis.call('PEXPIRE', k, bttl)
    end
    for i = 0, nb - 1 do
      local v = redis.call('HMGET', wp .. string.format('%d', idx - i), 'r', 's', 'f', 'l')
      r = r + (tonumber(v[1]) or 0)
      s = s + (tonumber(v[2]) or 0)
      f = f + (tonumber(v[3]) or 0)
      l = l + (tonumber(v[4]) or 0)
    end
    if current and (fai > 0 or slo > 0) then
      local n = s + f
      trip = n > 0 and n >= minc and ((fpct > 0 and f * 100 >= fpct * n) or (spct > 0 and l * 100 >= spct * n))
    end
  end
elseif current and req + suc + fai + slo + longest + saw > 0 then
  b.r, b.s, b.f, b.l = b.r + req, b.s + suc, b.f + fai, b.l + slo
  r, s, f, l = b.r, b.s, b.f, b.l
  if saw == 1 then
    -- the leading run continues the fleet's run; the longest run stands
    -- alone; the trailing run is the fleet's run from now on
    trip = b.consec + lead >= limit or longest >= limit
    b.consec = trail
  else
    b.consec = b.consec + trail
  end
  trip = trip or b.consec >= limit
  dirty = true
end

if ltrip and current then trip = true end
if trip then
  open(b, KEYS[2], now, tonumber(ARGV[16]), tonumber(ARGV[17]), tonumber(ARGV[18]), tonumber(ARGV[19]), tonumber(ARGV[20]))
  dirty = true
end

if dirty then save(KEYS[1], b, ttl) else redis.call('PEXPIRE', KEYS[1], ttl) end
local n = 0
if b.st == 1 then n = inuse(KEYS[2], now) end
if b.st ~= 0 or (b.gen ~= cgen and not anygen) then r, s, f, l = 0, 0, 0, 0 end
local carried = 0
if b.st == 0 and ((not lost and b.gen == cgen) or (lost and held == 0 and b.gen == b.born)) then carried = 1 end
return {b.st, b.gen, b.untl, n, r, s, f, l, b.consec, now, b.epoch, carried}
`)

// claimScript takes a half-open probe permit, moving an open breaker whose
// period has ended to half-open first. A replayed claim finds its permit
// and is granted it again.
//
// KEYS: state, probes. ARGV: now (-1: TIME), member, lease, maxProbes, ttl.
// ARGV 6: the epoch of the state the caller last saw; if Redis lost that
// state, nothing is done and lost is 1.
// Returns: granted (0 or 1), st, gen, until, probes in use, now, lost.
var claimScript = redis.NewScript(breakerLib + `
local now, member, lease, maxp, ttl = clock(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if lostState(KEYS[1], tonumber(ARGV[6])) then return {0, 0, 0, 0, 0, now, 1} end
local b, fresh = load(KEYS[1], now)
local dirty = fresh
if expire(b, KEYS[2], now) then dirty = true end
local granted, n = 0, 0
if b.st == 1 then
  n = inuse(KEYS[2], now)
  if redis.call('ZSCORE', KEYS[2], member) then
    granted = 1 -- a replay of a claim that was granted
  elseif n < maxp then
    redis.call('ZADD', KEYS[2], now + lease, member)
    redis.call('PEXPIRE', KEYS[2], ttl)
    granted, n = 1, n + 1
  end
end
if dirty then save(KEYS[1], b, ttl) else redis.call('PEXPIRE', KEYS[1], ttl) end
return {granted, b.st, b.gen, b.untl, n, now, 0}
`)

// reportScript releases a probe permit with the probe's outcome: a failure
// reopens the breaker, enough successes close it, an excluded outcome only
// releases the permit. A permit whose lease ran out, or that belongs to an
// earlier generation, changes nothing; nor does a replayed report, whose
// permit is gone.
//
// KEYS: state, probes. ARGV: now (-1: TIME), member, gen, outcome (0 success,
// 1 failure, 2 excluded), success threshold, open base, open max,
// multiplier, jitter, rnd, ttl, epoch (as for claimScript).
// Returns: st, gen, until, probes in use, now, lost.
var reportScript = redis.NewScript(breakerLib + `
local now, member, pgen, outcome = clock(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local ttl = tonumber(ARGV[11])
if lostState(KEYS[1], tonumber(ARGV[12])) then return {0, 0, 0, 0, now, 1} end
local b, fresh = load(KEYS[1], now)
local dirty = fresh
local held = redis.call('ZSCORE', KEYS[2], member)
redis.call('ZREM', KEYS[2], member)
if held and tonumber(held) > now and b.st == 1 and b.gen == pgen then
  if outcome == 1 then
    open(b, KEYS[2], now, tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]))
    dirty = true
  elseif outcome == 0 then
    b.succ = b.succ + 1
    if b.succ >= tonumber(ARGV[5]) then
      reset(b, KEYS[2], 0)
      b.trips = 0
    end
    dirty = true
  end
end
if expire(b, KEYS[2], now) then dirty = true end
if dirty then save(KEYS[1], b, ttl) else redis.call('PEXPIRE', KEYS[1], ttl) end
local n = 0
if b.st == 1 then n = inuse(KEYS[2], now) end
return {b.st, b.gen, b.untl, n, now, 0}
`)

// budgetScript applies one process's net deposits to the shared bucket and
// grants it a lease of tokens.
//
// KEYS: bucket, seen (this process's last exchange). ARGV: delta (net
// deposits, may be negative), want (lease asked for), max, initial,
// threshold, ttl, seq (the exchange's number: a replay of the last one
// applied returns its reply again and changes nothing), epoch (of the
// bucket the process last saw; 0: none), full (the whole lease, asked for
// instead of want when the bucket was lost), returned (lease given back by
// Close, added to the bucket unless it was lost).
// The bucket starts with initial tokens and holds 0 to max; it carries an
// epoch, made when the bucket is made, so that a process notices a bucket
// Redis lost (restart, FLUSHALL, eviction, failover) and drops a lease taken
// from it. A lease is granted, up to want, while the bucket holds more than
// threshold.
// Returns: granted, tokens left, epoch, lost (1: the process's lease is void).
var budgetScript = redis.NewScript(`
local delta, want = tonumber(ARGV[1]), tonumber(ARGV[2])
local maxt, initial, threshold, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local seq, known, full, returned = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local last = redis.call('HMGET', KEYS[2], 'seq', 'grant', 'tokens', 'epoch', 'lost')
if last[1] and seq <= tonumber(last[1]) then
  return {tonumber(last[2]), tonumber(last[3]), tonumber(last[4]), tonumber(last[5])}
end
local v = redis.call('HMGET', KEYS[1], 'tokens', 'epoch')
local t, epoch = initial, tonumber(v[2])
if v[1] then t = tonumber(v[1]) end
if not v[1] or not epoch then
  local tm = redis.call('TIME')
  epoch = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
end
local lost = 0
if known ~= 0 and known ~= epoch then
  lost = 1
  want = full
else
  delta = delta + returned
end
t = math.min(math.max(t + delta, 0), maxt)
local grant = 0
if want > 0 and t > threshold then
  grant = math.min(want, t)
  t = t - grant
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%d', t), 'epoch', string.format('%d', epoch))
redis.call('PEXPIRE', KEYS[1], ttl)
if delta ~= 0 or grant > 0 or lost == 1 then
  redis.call('HSET', KEYS[2], 'seq', string.format('%d', seq), 'grant', string.format('%d', grant),
             'tokens', string.format('%d', t), 'epoch', string.format('%d', epoch), 'lost', lost)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return {grant, t, epoch, lost}
`)
