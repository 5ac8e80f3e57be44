package live

import (
	"strconv"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// TestKeyTrackerModel compares the tracker with a direct model on random
// sequences of executions.
func TestKeyTrackerModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var k keyTracker
		type model struct{ active, execs, done, maxActive int }
		keys := map[string]*model{}
		type run struct {
			key string
		}
		var running []run
		var keyless int64
		steps := rapid.IntRange(0, 200).Draw(t, "steps")
		for range steps {
			if len(running) > 0 && rapid.Bool().Draw(t, "end") {
				i := rapid.IntRange(0, len(running)-1).Draw(t, "which")
				r := running[i]
				running = append(running[:i], running[i+1:]...)
				completed := rapid.Bool().Draw(t, "completed")
				k.end(r.key, completed)
				if r.key != "" {
					m := keys[r.key]
					m.active--
					if completed {
						m.done++
					}
				}
				continue
			}
			key := ""
			if n := rapid.IntRange(-1, 4).Draw(t, "key"); n >= 0 {
				key = "k" + strconv.Itoa(n)
			}
			k.begin(key)
			running = append(running, run{key})
			if key == "" {
				keyless++
				continue
			}
			m := keys[key]
			if m == nil {
				m = &model{}
				keys[key] = m
			}
			m.active++
			m.execs++
			m.maxActive = max(m.maxActive, m.active)
		}
		got := k.result()
		var want Duplicates
		want.Keys = int64(len(keys))
		want.Keyless = keyless
		for _, m := range keys {
			want.Executions += int64(m.execs)
			want.DuplicateExecutions += int64(m.execs - 1)
			want.DuplicateCompletions += int64(max(m.done-1, 0))
			want.MaxExecutionsPerKey = max(want.MaxExecutionsPerKey, m.execs)
			want.MaxCompletionsPerKey = max(want.MaxCompletionsPerKey, m.done)
			want.MaxConcurrentPerKey = max(want.MaxConcurrentPerKey, m.maxActive)
			if m.maxActive > 1 {
				want.ConcurrentKeys++
			}
		}
		if got != want {
			t.Fatalf("tracker %+v, model %+v", got, want)
		}
	})
}

func TestKeyTrackerConcurrent(t *testing.T) {
	var k keyTracker
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				key := "k" + strconv.Itoa(i)
				k.begin(key)
				k.end(key, g == 0)
			}
		}()
	}
	wg.Wait()
	d := k.result()
	if d.Keys != 100 || d.Executions != 800 || d.DuplicateExecutions != 700 || d.MaxExecutionsPerKey != 8 || d.DuplicateCompletions != 0 {
		t.Errorf("%+v", d)
	}
}
