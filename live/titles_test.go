package live

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// `live gateway-restart --clients 200` used to be titled "500 agents".
func TestLiveTitlesFollowTheScenarioAsRun(t *testing.T) {
	sc := GatewayRestart()
	sc.Clients = 200
	if r := newReport(&sc, Options{}); !strings.Contains(r.Title, "200 agents") || !strings.Contains(r.Title, "503s for 3s") {
		t.Errorf("title %q", r.Title)
	}
	sc.Duration = 6 * time.Second
	if r := newReport(&sc, Options{}); !strings.Contains(r.Title, "for 1s (cut from 3s by the 6s run)") {
		t.Errorf("title %q", r.Title)
	}
	sd := SlowDownstream()
	sd.Clients = 30
	if r := newReport(&sd, Options{}); !strings.Contains(r.Title, "30 clients") || !strings.Contains(r.Title, "for 4s") {
		t.Errorf("title %q", r.Title)
	}
}

// Live cascade's and brownout's titles printed the default windows as
// "333.333333ms–666.666666ms".
func TestLiveTopologyTitlesRoundDurations(t *testing.T) {
	co := CascadeOptions{Duration: time.Second}
	bo := SlowdownHedgingOptions{Duration: time.Second}
	if err := co.defaults(); err != nil {
		t.Fatal(err)
	}
	if err := bo.defaults(); err != nil {
		t.Fatal(err)
	}
	for _, title := range []string{(&CascadeReport{Options: co}).Table().Title, (&SlowdownHedgingReport{Options: bo}).Table().Title} {
		if strings.Contains(title, "333.333") || !strings.Contains(title, "333ms–667ms") {
			t.Errorf("title %q: want the window as 333ms–667ms", title)
		}
	}
}

// Live cascade's and brownout's JSON used Go field names and nanoseconds;
// sim's uses snake_case keys and seconds.
func TestLiveTopologyJSONIsSnakeCaseSeconds(t *testing.T) {
	co := CascadeOptions{Duration: 3 * time.Second, Seed: 9}
	bo := SlowdownHedgingOptions{Duration: 3 * time.Second}
	co.defaults()
	bo.defaults()
	for _, v := range []any{
		&CascadeReport{Options: co, Rows: []CascadeRow{{Policy: CascadePolicies()[0], P99: 1500 * time.Millisecond}}},
		&SlowdownHedgingReport{Options: bo, Rows: []SlowdownHedgingRow{{Policy: SlowdownHedgingPolicies()[0], P99: 1500 * time.Millisecond}}},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for k := range m {
			if k != strings.ToLower(k) {
				t.Errorf("key %q is not snake_case: %s", k, b)
			}
		}
		rows, _ := m["rows"].([]any)
		if len(rows) != 1 || rows[0].(map[string]any)["p99_s"] != 1.5 || m["duration_s"] != 3.0 || m["scenario"] == "" {
			t.Errorf("want rows[0].p99_s 1.5, duration_s 3 and the scenario: %s", b)
		}
	}
}

// RunCascade and RunSlowdownHedging with Sequential run one policy at a time.
func TestRunPoliciesSequential(t *testing.T) {
	var running, most atomic.Int32
	rows, err := runPolicies([]int{1, 2, 3}, true, func(p int) (int, error) {
		n := running.Add(1)
		defer running.Add(-1)
		most.Store(max(most.Load(), n))
		return 10 * p, nil
	})
	if err != nil || len(rows) != 3 || rows[2] != 30 || most.Load() != 1 {
		t.Errorf("rows %v, err %v, %d at once; want 10, 20, 30 one at a time", rows, err, most.Load())
	}
}

// The open-loop schedule comes from the seed: the same seed, the same
// calls; another seed, other phases; at most maxCalls, in time order.
func TestOpenScheduleFollowsTheSeed(t *testing.T) {
	a := openSchedule(4, 100*time.Millisecond, time.Second, 1, 1000)
	b := openSchedule(4, 100*time.Millisecond, time.Second, 1, 1000)
	c := openSchedule(4, 100*time.Millisecond, time.Second, 2, 1000)
	if len(a) != 40 || !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Errorf("%d calls; same seed equal %v, other seed equal %v", len(a), slices.Equal(a, b), slices.Equal(a, c))
	}
	if !slices.IsSortedFunc(a, func(x, y openCall) int { return cmp.Compare(x.At, y.At) }) {
		t.Error("schedule not in time order")
	}
	if d := openSchedule(4, 100*time.Millisecond, time.Second, 1, 7); !slices.Equal(d, a[:7]) {
		t.Errorf("maxCalls 7: %v, want the first 7 of %v", d, a)
	}
}

// An interval near math.MaxInt64 gives each client one call, not a
// schedule wrapped round into the past.
func TestOpenScheduleHugeIntervalDoesNotWrap(t *testing.T) {
	s := openSchedule(3, time.Duration(math.MaxInt64-1), time.Second, 1, 100)
	for _, c := range s {
		if c.At < 0 || c.At >= time.Second {
			t.Errorf("call at %s, outside [0, 1s)", c.At)
		}
	}
	if len(s) > 3 {
		t.Errorf("%d calls for 3 clients with one interval each", len(s))
	}
}
