package live

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkRecorderAttempt measures what the harness adds to every attempt
// on the client side, from many goroutines at once.
func BenchmarkRecorderAttempt(b *testing.B) {
	r := newRecorder(time.Now(), 10*time.Millisecond, time.Minute)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.attemptSent(false)
			r.attemptEnded(true)
		}
	})
}

// BenchmarkServerRecord measures what the harness adds to every request on
// the server side: arrival, leaving, the execution and its key.
func BenchmarkServerRecord(b *testing.B) {
	r := newRecorder(time.Now(), 10*time.Millisecond, time.Minute)
	var k keyTracker
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "c" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		key := keys[i%len(keys)]
		r.arrived(false)
		k.begin(key)
		k.end(key, true)
		r.executed(time.Millisecond, 0, false, false, false)
		r.left()
	}
}
