package breaker

import (
	"testing"
	"time"
)

// call outcomes for the window tables: 'S' success, 'F' failure,
// 'C' cancelled (excluded); digits advance the fake clock by that many
// seconds.
func playWindow(t *testing.T, b *Breaker, fc interface{ Advance(time.Duration) }, script string) {
	t.Helper()
	for i, c := range script {
		switch {
		case c == 'S':
			mustCallAt(t, b, nil, i)
		case c == 'F':
			mustCallAt(t, b, errDown, i)
		case c == 'C':
			mustCallAt(t, b, errFor(opCancel), i)
		case c >= '0' && c <= '9':
			fc.Advance(time.Duration(c-'0') * time.Second)
		case c == ' ':
		default:
			t.Fatalf("bad script character %q", c)
		}
	}
}

func mustCallAt(t *testing.T, b *Breaker, err error, i int) {
	t.Helper()
	if aerr := try(t, b, err); aerr != nil {
		t.Fatalf("script position %d: Allow refused a call in state %v: %v", i, b.State(), aerr)
	}
}

func TestCountWindow(t *testing.T) {
	cases := []struct {
		name   string
		window Window
		script string
		want   State
	}{
		{"below minimum calls", Window{Calls: 10, MinCalls: 5, FailureRatio: 0.5}, "FFFF", Closed},
		{"at minimum calls and rate", Window{Calls: 10, MinCalls: 5, FailureRatio: 0.5}, "FFFFS", Open},
		{"the trip can come on a success", Window{Calls: 10, MinCalls: 5, FailureRatio: 0.6}, "FFFS S", Open},
		{"rate just below", Window{Calls: 10, MinCalls: 5, FailureRatio: 0.5}, "FFSSS", Closed},
		{"minimum defaults to a full window", Window{Calls: 4, FailureRatio: 0.5}, "FFF", Closed},
		{"full default window", Window{Calls: 4, FailureRatio: 0.5}, "FFFS", Open},
		{"failure percent defaults to 50", Window{Calls: 4}, "SFSF", Open},
		{"sliding brings the rate up", Window{Calls: 4, FailureRatio: 0.75}, "FSSS SFFF", Open},
		{"excluded calls take no place", Window{Calls: 4, FailureRatio: 0.75}, "FFCCCCS F", Open},
		{"time does not matter", Window{Calls: 4, FailureRatio: 0.5}, "F9F9 9S", Closed},
		{"time does not matter either way", Window{Calls: 4, FailureRatio: 0.5}, "F9F9 9S9S", Open},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, fc := newTest(t, Config{Window: tc.window})
			playWindow(t, b, fc, tc.script)
			wantState(t, b, tc.want)
		})
	}
}

func TestCountWindowCounts(t *testing.T) {
	b, fc := newTest(t, Config{Window: Window{Calls: 4, FailureRatio: 0.9}})
	playWindow(t, b, fc, "FSFSSSC") // the first failure has slid out
	want := Counts{Requests: 7, Successes: 3, Failures: 1, ConsecutiveSuccesses: 3}
	if got := b.Counts(); got != want {
		t.Fatalf("Counts() = %+v, want %+v", got, want)
	}
	if r := b.Counts().FailureRate(); r != 0.25 {
		t.Fatalf("FailureRate() = %v", r)
	}
}

func TestTimeWindow(t *testing.T) {
	// A 10 s window of 10 buckets: a call at second s lives in bucket s
	// until the window no longer covers it, ten seconds later.
	w := Window{Duration: 10 * time.Second, Buckets: 10, MinCalls: 4, FailureRatio: 0.5}
	cases := []struct {
		name   string
		script string
		want   State
	}{
		{"below minimum calls", "FFF", Closed},
		{"at minimum calls and rate", "FFSS", Open},
		{"spread over the window", "F3F3S3S", Open},
		{"failures age out", "FF 9 1 SS", Closed},
		{"failures kept until the last bucket", "FF 9 SS", Open},
		{"aged successes do not dilute", "SSSS 9 1 FF SS", Open},
		{"excluded calls are not counted", "FCCCCS", Closed},
		{"a quiet window forgets", "FFF 9 9 9 S", Closed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, fc := newTest(t, Config{Window: w})
			playWindow(t, b, fc, tc.script)
			wantState(t, b, tc.want)
		})
	}
}

// TestSeedWindows checks the three time windows of the seed's settings at
// the edges of their minimum calls, rate and window length.
func TestSeedWindows(t *testing.T) {
	cases := []struct {
		window   Window
		minCalls int
		percent  float64
	}{
		{Window{Duration: 30 * time.Second, MinCalls: 5, FailureRatio: 0.4}, 5, 40},
		{Window{Duration: 60 * time.Second, MinCalls: 20, FailureRatio: 0.3}, 20, 30},
		{Window{Duration: 120 * time.Second, MinCalls: 50, FailureRatio: 0.25}, 50, 25},
	}
	for _, tc := range cases {
		name := tc.window.Duration.String()
		step := tc.window.Duration / time.Duration(2*tc.minCalls)  // minCalls calls in half the window
		failures := int(float64(tc.minCalls)*tc.percent/100 + 0.5) // exactly the threshold rate at minCalls
		t.Run(name+"/trips at the threshold", func(t *testing.T) {
			b, fc := newTest(t, Config{Window: tc.window})
			for i := range tc.minCalls {
				err := error(nil)
				if i < failures {
					err = errDown
				}
				wantState(t, b, Closed)
				mustCall(t, b, err)
				fc.Advance(step)
			}
			wantState(t, b, Open)
		})
		t.Run(name+"/not below the rate", func(t *testing.T) {
			b, fc := newTest(t, Config{Window: tc.window})
			for i := range tc.minCalls {
				err := error(nil)
				if i < failures-1 {
					err = errDown
				}
				mustCall(t, b, err)
				fc.Advance(step)
			}
			wantState(t, b, Closed)
		})
		t.Run(name+"/not below minimum calls", func(t *testing.T) {
			b, _ := newTest(t, Config{Window: tc.window})
			for range tc.minCalls - 1 {
				mustCall(t, b, errDown)
			}
			wantState(t, b, Closed)
			if c := b.Counts(); c.Failures != uint64(tc.minCalls-1) {
				t.Fatalf("Counts() = %+v", c)
			}
		})
		t.Run(name+"/failures older than the window do not count", func(t *testing.T) {
			b, fc := newTest(t, Config{Window: tc.window})
			for range tc.minCalls - 1 {
				mustCall(t, b, errDown)
			}
			fc.Advance(tc.window.Duration)
			mustCall(t, b, errDown)
			wantState(t, b, Closed)
			if c := b.Counts(); c.Failures != 1 {
				t.Fatalf("Counts() = %+v, want 1 failure in the window", c)
			}
		})
	}
}

func TestSlowCallRate(t *testing.T) {
	w := Window{Calls: 4, SlowCallDuration: time.Second, SlowCallRatio: 0.5}
	t.Run("slow successes trip", func(t *testing.T) {
		b, fc := newTest(t, Config{Window: w})
		timed(t, b, fc, time.Second, nil)
		timed(t, b, fc, 10*time.Millisecond, nil)
		timed(t, b, fc, 999*time.Millisecond, nil)
		wantState(t, b, Closed)
		timed(t, b, fc, 3*time.Second, nil)
		wantState(t, b, Open)
	})
	t.Run("failures alone do not trip a slow-call condition", func(t *testing.T) {
		b, fc := newTest(t, Config{Window: w})
		for range 4 {
			timed(t, b, fc, time.Millisecond, errDown)
		}
		wantState(t, b, Closed)
		if c := b.Counts(); c.Failures != 4 || c.SlowCalls != 0 {
			t.Fatalf("Counts() = %+v", c)
		}
	})
	t.Run("failure and slow rates together", func(t *testing.T) {
		cfg := Config{Window: Window{Calls: 4, FailureRatio: 0.5, SlowCallDuration: time.Second, SlowCallRatio: 0.75}}
		b, fc := newTest(t, cfg)
		timed(t, b, fc, 2*time.Second, nil)
		timed(t, b, fc, 2*time.Second, nil)
		timed(t, b, fc, 0, errDown)
		timed(t, b, fc, 0, nil)
		wantState(t, b, Closed) // 25% failures, 50% slow
		timed(t, b, fc, 2*time.Second, errDown)
		wantState(t, b, Open) // 50% failures
	})
	t.Run("over a time window", func(t *testing.T) {
		cfg := Config{Window: Window{Duration: 10 * time.Second, MinCalls: 2, SlowCallDuration: time.Second, SlowCallRatio: 1}}
		b, fc := newTest(t, cfg)
		timed(t, b, fc, 2*time.Second, nil)
		timed(t, b, fc, 0, nil)
		fc.Advance(10 * time.Second)
		timed(t, b, fc, 2*time.Second, nil)
		wantState(t, b, Closed) // the fast call is still in the window
		timed(t, b, fc, 2*time.Second, nil)
		wantState(t, b, Open)
	})
	t.Run("a slow probe reopens", func(t *testing.T) {
		b, fc := newTest(t, Config{Window: w, OpenTimeout: time.Minute})
		for range 4 {
			timed(t, b, fc, 2*time.Second, nil)
		}
		wantState(t, b, Open)
		fc.Advance(time.Minute)
		timed(t, b, fc, 2*time.Second, nil)
		wantState(t, b, Open)
		fc.Advance(time.Minute)
		timed(t, b, fc, 10*time.Millisecond, nil)
		wantState(t, b, Closed)
	})
}

func TestConsecutiveCounts(t *testing.T) {
	b, _ := newTest(t, Config{ConsecutiveFailures: 10})
	for _, err := range []error{nil, errDown, nil, nil, errFor(opCancel), errDown, errDown} {
		mustCall(t, b, err)
	}
	want := Counts{Requests: 7, Successes: 3, Failures: 3, ConsecutiveFailures: 2}
	if got := b.Counts(); got != want {
		t.Fatalf("Counts() = %+v, want %+v", got, want)
	}
	mustCall(t, b, nil)
	mustCall(t, b, nil)
	want = Counts{Requests: 9, Successes: 5, Failures: 3, ConsecutiveSuccesses: 2}
	if got := b.Counts(); got != want {
		t.Fatalf("Counts() = %+v, want %+v", got, want)
	}
}

func TestReadyToTrip(t *testing.T) {
	t.Run("since the breaker closed", func(t *testing.T) {
		var seen []Counts
		b, fc := newTest(t, Config{OpenTimeout: time.Second, ReadyToTrip: func(c Counts) bool {
			seen = append(seen, c)
			return c.Failures >= 3 && c.FailureRate() > 0.5
		}})
		playWindow(t, b, fc, "SSFSFSFS") // 3 of 8: not over half
		wantState(t, b, Closed)
		if len(seen) != 3 {
			t.Fatalf("ReadyToTrip called %d times, want once per failure", len(seen))
		}
		if last := seen[2]; last.Requests != 7 || last.Failures != 3 || last.Successes != 4 || last.ConsecutiveFailures != 1 {
			t.Fatalf("ReadyToTrip saw %+v", last)
		}
		playWindow(t, b, fc, "FFF")
		wantState(t, b, Open)
		fc.Advance(time.Second)
		mustCall(t, b, nil)
		wantState(t, b, Closed)
		if c := b.Counts(); c != (Counts{}) {
			t.Fatalf("Counts() after closing = %+v, want zero", c)
		}
	})
	t.Run("over a window", func(t *testing.T) {
		b, fc := newTest(t, Config{Window: Window{Calls: 3}, ReadyToTrip: func(c Counts) bool {
			return c.Failures == 3
		}})
		playWindow(t, b, fc, "FFSFF")
		wantState(t, b, Closed)
		playWindow(t, b, fc, "F")
		wantState(t, b, Open)
	})
	t.Run("slow calls reach the hook", func(t *testing.T) {
		b, fc := newTest(t, Config{Window: Window{Duration: time.Minute, SlowCallDuration: time.Second},
			ReadyToTrip: func(c Counts) bool { return c.SlowCalls >= 2 }})
		timed(t, b, fc, time.Second, nil)
		wantState(t, b, Closed)
		timed(t, b, fc, time.Second, nil)
		wantState(t, b, Open)
	})
}
