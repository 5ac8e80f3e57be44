package config

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/retry"
)

const admissionFile = `policies:
  default: {}
admission:
  api:
    algorithm: gradient2
    initial_limit: 10
    min_limit: 2
    max_limit: 50
    smoothing: 0.3
    tolerance: 2
    queue_size: 20
    codel_target: 10ms
    codel_interval: 200ms
  db:
    algorithm: fixed
    limit: 7
    queue_size: none
    lifo: false
    probe_interval: never
  jobs:
    algorithm: aimd
    max_limit: 30
    backoff_ratio: 0.7
    timeout: 2s
`

// TestAdmissionBlockParses (issue 38 item 4): the admission block's
// fields reach admission.Config and the algorithms' configs.
func TestAdmissionBlockParses(t *testing.T) {
	f := mustParse(t, admissionFile)
	api, db, jobs := f.Admission["api"], f.Admission["db"], f.Admission["jobs"]
	if api == nil || db == nil || jobs == nil {
		t.Fatalf("admission specs %v", f.Admission)
	}
	if g := api.Gradient2; api.Algorithm != AlgorithmGradient2 || g.InitialLimit != 10 || g.MinLimit != 2 || g.MaxLimit != 50 || g.Smoothing != 0.3 || g.Tolerance != 2 {
		t.Fatalf("api %+v", api)
	}
	if c := api.Config; c.QueueLength != 20 || c.QueueTarget != 10*time.Millisecond || c.QueueInterval != 200*time.Millisecond || c.FIFO {
		t.Fatalf("api config %+v", c)
	}
	if db.Algorithm != AlgorithmFixed || db.Fixed.N != 7 || db.Config.QueueLength != -1 || !db.Config.FIFO || db.Config.ProbeInterval != -1 {
		t.Fatalf("db %+v", db)
	}
	if a := jobs.AIMD; jobs.Algorithm != AlgorithmAIMD || a.MaxLimit != 30 || a.BackoffRatio != 0.7 || a.Timeout != 2*time.Second {
		t.Fatalf("jobs %+v", jobs)
	}
	l, err := db.NewLimiter(nil)
	if err != nil || l.Limit() != 7 {
		t.Fatalf("db limiter %v, %v; want a limit of 7", l, err)
	}
	if l, err := api.NewLimiter(nil); err != nil || l.Limit() != 10 {
		t.Fatalf("api limiter %v, %v; want the initial limit of 10", l, err)
	}
}

// TestAdmissionBlockRefusesBadValues (issue 38, bad input): limits of 0,
// negative or NaN, a target above the interval, an interval of 0 and the
// like are refused with file:line, the field and the reason.
func TestAdmissionBlockRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		name, block string
		want        string // in the error, after "test.yaml:"
	}{
		{"min_limit 0", "min_limit: 0", "5: admission.api.min_limit: 0 is refused: a limit must be at least 1"},
		{"max_limit negative", "max_limit: -3", "5: admission.api.max_limit: -3 is refused: a limit must be at least 1"},
		{"initial_limit NaN", "initial_limit: NaN", `5: admission.api.initial_limit: "NaN" is not a whole number`},
		{"fixed limit 0", "algorithm: fixed\n    limit: 0", "6: admission.api.limit: 0 is refused: a limit must be at least 1"},
		{"fixed without limit", "algorithm: fixed", "5: admission.api: algorithm fixed needs limit"},
		{"min above max", "min_limit: 9\n    max_limit: 3", "5: admission.api.min_limit: 9 is above max_limit (3)"},
		{"target above interval", "codel_target: 200ms\n    codel_interval: 100ms", "5: admission.api.codel_target: 200ms is above codel_interval (100ms): a request may wait less while a queue stands than while it is passing"},
		{"target above default interval", "codel_target: 150ms", "5: admission.api.codel_target: 150ms is above codel_interval (100ms)"},
		{"interval 0", "codel_interval: 0", "5: admission.api.codel_interval: 0 is refused: it must be positive"},
		{"target 0", "codel_target: 0", "5: admission.api.codel_target: 0 is refused: it must be positive"},
		{"queue_size 0", "queue_size: 0", "5: admission.api.queue_size: 0 is refused"},
		{"queue_size negative", "queue_size: -1", "5: admission.api.queue_size: -1 is outside [1, 1073741824]"},
		{"smoothing NaN", "smoothing: NaN", `5: admission.api.smoothing: "NaN" is not a number`},
		{"tolerance below 1", "tolerance: 0.5", "5: admission.api.tolerance: 0.5 is outside [1,"},
		{"unknown algorithm", "algorithm: bbr", `5: admission.api.algorithm: "bbr" is not one of gradient2, vegas, aimd, fixed`},
		{"field of another algorithm", "algorithm: aimd\n    tolerance: 2", "6: admission.api.tolerance: does not apply to algorithm aimd"},
		{"unknown field", "target: 5ms", "5: admission.api.target: unknown field"},
		{"probe_interval 0", "probe_interval: 0", "5: admission.api.probe_interval: 0 is refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "policies:\n  default: {}\nadmission:\n  api:\n    " + c.block + "\n"
			_, err := Parse("test.yaml", []byte(src))
			if err == nil || !strings.Contains(err.Error(), "test.yaml:"+c.want) {
				t.Fatalf("error %v\nwant it to contain test.yaml:%s", err, c.want)
			}
		})
	}
}

// admissionWatcher records WatchAdmission calls, as promretry's Collector
// and otelretry's Observer implement it.
type admissionWatcher struct {
	retry.NopObserver
	mu      sync.Mutex
	watched map[string]*admission.Limiter
}

func (w *admissionWatcher) WatchAdmission(name string, l *admission.Limiter) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watched[name] = l
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.watched[name] == l {
			delete(w.watched, name)
		}
	}
}

func (w *admissionWatcher) get(name string) *admission.Limiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.watched[name]
}

// TestAdmissionReloadKeepsOrReplacesLimiter (issue 38 item 4, hot
// reload): a reload that leaves an admission block's settings alone keeps
// its Limiter (and what it has in flight); one that changes them builds a
// new Limiter, which the handle serves from then on, and a permit of the
// old one is released to the old one: it neither counts against nor
// disturbs the new one. The observer watches each Limiter in force.
func TestAdmissionReloadKeepsOrReplacesLimiter(t *testing.T) {
	path := t.TempDir() + "/policies.yaml"
	writeFile(t, path, admissionFile)
	w := &admissionWatcher{watched: map[string]*admission.Limiter{}}
	r, err := Open(path, Options{Logger: discard, Observer: w})
	if err != nil {
		t.Fatal(err)
	}
	h := r.Admission("db")
	old := h.Limiter()
	if old.Limit() != 7 || w.get("db") != old {
		t.Fatalf("limit %d, watched %p; want 7 and the handle's Limiter %p", old.Limit(), w.get("db"), old)
	}
	p, err := old.TryAcquire()
	if err != nil {
		t.Fatal(err)
	}
	// Unchanged settings (another policy changes): the same Limiter.
	writeFile(t, path, strings.Replace(admissionFile, "default: {}", "default: {max_attempts: 2}", 1))
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	if h.Limiter() != old || old.InFlight() != 1 {
		t.Fatalf("an unchanged block's Limiter was replaced (or lost its count: %d in flight)", old.InFlight())
	}
	// Changed settings: a new Limiter.
	writeFile(t, path, strings.Replace(admissionFile, "limit: 7", "limit: 9", 1))
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	cur := h.Limiter()
	if cur == old || cur.Limit() != 9 || cur.InFlight() != 0 || w.get("db") != cur {
		t.Fatalf("after the change: same %v, limit %d, in flight %d, watched new %v", cur == old, cur.Limit(), cur.InFlight(), w.get("db") == cur)
	}
	p.Release()
	if old.InFlight() != 0 || cur.InFlight() != 0 {
		t.Fatalf("after the old permit's release: old %d, new %d in flight; want 0, 0", old.InFlight(), cur.InFlight())
	}
	// A name the file does not cover is protected by the defaults.
	if l := r.Admission("other").Limiter(); l == nil || l.Limit() != admission.DefaultInitialLimit {
		t.Fatalf("uncovered name: %v, want a default Limiter", l)
	}
	// A reload that drops a block in use: the handle keeps protection,
	// with the default settings.
	writeFile(t, path, "policies:\n  default: {}\n")
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	if l := h.Limiter(); l == nil || l == cur || l.Limit() != admission.DefaultInitialLimit {
		t.Fatalf("dropped block: %v, want a default Limiter", l)
	}
}

// TestAdmissionHandlerFollowsReload: AdmissionHandle.Handler admits each
// request through the Limiter in force when it arrives.
func TestAdmissionHandlerFollowsReload(t *testing.T) {
	path := t.TempDir() + "/policies.yaml"
	file := "policies:\n  default: {}\nadmission:\n  api: {algorithm: fixed, limit: 1, queue_size: none}\n"
	writeFile(t, path, file)
	r, err := Open(path, Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	h := r.Admission("api")
	srv := h.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	hold, err := h.Limiter().TryAcquire() // the one slot is busy
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Release()
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Stormguard-Overloaded") != "1" {
		t.Fatalf("at the limit: %d %v, want the overload answer", rec.Code, rec.Header())
	}
	writeFile(t, path, strings.Replace(file, "limit: 1", "limit: 2", 1))
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("after the reload: %d, want 200 (a fresh Limiter of 2)", rec.Code)
	}
}

// TestSchemaAdmissionMatchesDecoder keeps schema.json's admission block
// and the decoder's field list in step.
func TestSchemaAdmissionMatchesDecoder(t *testing.T) {
	data, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties struct {
			Admission struct {
				AdditionalProperties struct {
					Properties map[string]any `json:"properties"`
				} `json:"additionalProperties"`
			} `json:"admission"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range s.Properties.Admission.AdditionalProperties.Properties {
		got = append(got, k)
	}
	if g, w := strings.Join(sorted(got), ","), strings.Join(sorted(admissionFields("")), ","); g != w {
		t.Fatalf("schema.json admission fields %s, decoder %s", g, w)
	}
}

// TestAdmissionProbeLengthFileForm (review, #38): probe_length is the
// file form of admission.Config.ProbeLength, and 0 or a negative length
// is refused with its line; left out, the probe is one window long.
func TestAdmissionProbeLengthFileForm(t *testing.T) {
	f := mustParse(t, "policies:\n  default: {}\nadmission:\n  api:\n    window: 1s\n    probe_length: 20ms\n  db: {}\n")
	if got := f.Admission["api"].Config.ProbeLength; got != 20*time.Millisecond {
		t.Fatalf("probe_length: 20ms gave ProbeLength %v", got)
	}
	if got := f.Admission["db"].Config.ProbeLength; got != 0 {
		t.Fatalf("no probe_length gave ProbeLength %v, want 0 (one window)", got)
	}
	if _, err := f.Admission["api"].NewLimiter(nil); err != nil {
		t.Fatal(err)
	}
	for block, want := range map[string]string{
		"probe_length: 0":    "test.yaml:5: admission.api.probe_length: 0 is refused: it must be positive (leave the field out for one window)",
		"probe_length: -5ms": `test.yaml:5: admission.api.probe_length: "-5ms" must not be negative`,
		"probe_length: 25h":  `test.yaml:5: admission.api.probe_length: "25h" is above the limit of 24h`,
	} {
		_, err := Parse("test.yaml", []byte("policies:\n  default: {}\nadmission:\n  api:\n    "+block+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v\nwant it to contain %s", block, err, want)
		}
	}
}

// The file form of admission.Config.Seed (and VegasConfig.Seed): the same
// seed gives the same probe schedule; left out, each Limiter draws its own.
func TestAdmissionSeedFileForm(t *testing.T) {
	f := mustParse(t, "policies:\n  default: {}\nadmission:\n  api:\n    seed: 18446744073709551615\n  v:\n    algorithm: vegas\n    seed: 7\n  db: {}\n")
	if got := f.Admission["api"].Config.Seed; got != math.MaxUint64 {
		t.Errorf("seed: 18446744073709551615 gave Seed %d", got)
	}
	if v := f.Admission["v"]; v.Config.Seed != 7 || v.Vegas.Seed != 7 {
		t.Errorf("vegas seed: 7 gave Seed %d and Vegas.Seed %d", v.Config.Seed, v.Vegas.Seed)
	}
	if got := f.Admission["db"].Config.Seed; got != 0 {
		t.Errorf("no seed gave Seed %d, want 0 (random)", got)
	}
	if f.Admission["api"].key() == f.Admission["db"].key() {
		t.Error("a seed does not change the block's key: a reload that sets it would keep the old Limiter")
	}
	for block, want := range map[string]string{
		"seed: 0":                    "test.yaml:5: admission.api.seed: 0 is refused",
		"seed: -1":                   `test.yaml:5: admission.api.seed: "-1" is not a whole number`,
		"seed: 18446744073709551616": `test.yaml:5: admission.api.seed: "18446744073709551616" is not a whole number`,
		"seed: x":                    `test.yaml:5: admission.api.seed: "x" is not a whole number`,
	} {
		_, err := Parse("test.yaml", []byte("policies:\n  default: {}\nadmission:\n  api:\n    "+block+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v\nwant it to contain %s", block, err, want)
		}
	}
}

// TestAdmissionShortIntervalAlone: codel_interval below the default
// target (5ms) with codel_target left out is accepted, as
// admission.Config takes QueueInterval alone: the target defaults to at
// most the interval. A codel_target above it is still refused.
func TestAdmissionShortIntervalAlone(t *testing.T) {
	f := mustParse(t, "policies:\n  default: {}\nadmission:\n  api:\n    codel_interval: 2ms\n")
	a := f.Admission["api"]
	if a.Config.QueueInterval != 2*time.Millisecond || a.Config.QueueTarget != 0 {
		t.Fatalf("codel_interval: 2ms gave QueueInterval %v, QueueTarget %v; want 2ms and 0 (the default)", a.Config.QueueInterval, a.Config.QueueTarget)
	}
	if _, err := a.NewLimiter(nil); err != nil {
		t.Fatalf("the Limiter of codel_interval: 2ms alone: %v", err)
	}
	_, err := Parse("test.yaml", []byte("policies:\n  default: {}\nadmission:\n  api:\n    codel_interval: 2ms\n    codel_target: 3ms\n"))
	if want := "admission.api.codel_target: 3ms is above codel_interval (2ms)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("codel_target above a short interval: error %v, want it to contain %s", err, want)
	}
}
