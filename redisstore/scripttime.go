package redisstore

import (
	"context"
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/clock"
)

// scriptTime is the time the breaker scripts compare: Redis's own clock
// (TIME), so that clock skew between the hosts of a fleet moves no open
// period and frees no live probe permit.
//
// On the real clock every script reads TIME. Another Clock (a fake clock
// in tests, or a wrapper) is anchored to Redis's clock at its first
// exchange: the scripts then get that TIME plus how far the Clock has
// moved since, so a constant offset between the Clock and Redis does not
// matter, and a fake clock still drives the shared state. Every Breaker of
// the process that uses the same Clock value shares its anchor.
type scriptTime struct {
	clk  clock.Clock
	real bool
	key  any // the Clock, when it can key the anchors map

	mu  sync.Mutex
	own *anchor // the anchor, once known
}

type anchor struct {
	clk0   time.Time // the Clock's reading ...
	redis0 int64     // ... and Redis's at the same moment, in ms
}

var anchors sync.Map // clock.Clock → *anchor

func newScriptTime(clk clock.Clock) *scriptTime {
	st := &scriptTime{clk: clk, real: clk == clock.Real}
	if !st.real && reflect.TypeOf(clk).Comparable() {
		st.key = clk
	}
	return st
}

// redisTimeScript returns Redis's clock in milliseconds.
var redisTimeScript = redis.NewScript(`
local t = redis.call('TIME')
return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`)

func (st *scriptTime) anchor(ctx context.Context, c redis.Scripter) (*anchor, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.own != nil {
		return st.own, nil
	}
	if st.key != nil {
		if a, ok := anchors.Load(st.key); ok {
			st.own = a.(*anchor)
			return st.own, nil
		}
	}
	clk0 := st.clk.Now()
	ms, err := redisTimeScript.Run(ctx, c, nil).Int64()
	if err != nil {
		return nil, err
	}
	a := &anchor{clk0: clk0, redis0: ms}
	if st.key != nil {
		v, _ := anchors.LoadOrStore(st.key, a)
		a = v.(*anchor)
	}
	st.own = a
	return a, nil
}

// now returns the "now" argument of a script: -1 (read TIME) on the real
// clock, else the anchored Clock's reading on Redis's time line.
func (st *scriptTime) now(ctx context.Context, c redis.Scripter) (int64, error) {
	if st.real {
		return -1, nil
	}
	a, err := st.anchor(ctx, c)
	if err != nil {
		return 0, err
	}
	return a.redis0 + st.clk.Now().Sub(a.clk0).Milliseconds(), nil
}

// local converts a time t of the scripts (ms) to the Clock's time line,
// given the script's now.
func (st *scriptTime) local(now, t int64) time.Time {
	if st.real {
		return st.clk.Now().Add(scriptMillis(t - now))
	}
	st.mu.Lock()
	a := st.own
	st.mu.Unlock()
	return a.clk0.Add(scriptMillis(t - a.redis0))
}

// scriptMillis returns ms milliseconds as a Duration, saturated at the
// longest (or most negative) Duration instead of wrapping: an open
// period near the longest Duration then ends far ahead, not in the past.
func scriptMillis(ms int64) time.Duration {
	const most = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > most:
		return math.MaxInt64
	case ms < -most:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}
