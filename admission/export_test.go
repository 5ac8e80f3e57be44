package admission

// SampleForTest makes l sample RTTs at high rates as it does on
// clock.Real, picking a request for timing when coin returns a multiple
// of 8. Call it before l is used.
func SampleForTest(l *Limiter, coin func() uint32) { l.sample, l.coin = true, coin }

// TimeEveryForTest makes l time every request, as it does below the
// sampling rate. Call it before l is used.
func TimeEveryForTest(l *Limiter) { l.sample = false }

// StateForTest returns g's limit and long-term RTT, unrounded.
func (g *Gradient2) StateForTest() (limit, long float64) { return g.limit, g.long.v }

// QueueLockedForTest reports whether l's queue lock is held.
func QueueLockedForTest(l *Limiter) bool {
	if l.q.mu.TryLock() {
		l.q.mu.Unlock()
		return false
	}
	return true
}

// ProbeAtForTest returns the sample count at which v measures its
// no-load RTT anew.
func (v *Vegas) ProbeAtForTest() int { return v.probeAt }
