package config

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
	"go.yaml.in/yaml/v3"
)

// The algorithms of an admission block (AdmissionSpec.Algorithm).
const (
	AlgorithmGradient2 = "gradient2" // admission.Gradient2, the default
	AlgorithmVegas     = "vegas"     // admission.Vegas
	AlgorithmAIMD      = "aimd"      // admission.AIMD
	AlgorithmFixed     = "fixed"     // admission.Fixed
)

var admissionAlgorithms = []string{AlgorithmGradient2, AlgorithmVegas, AlgorithmAIMD, AlgorithmFixed}

// The fields of an admission block: those of every algorithm, and each
// algorithm's own.
var (
	admissionCommon = []string{"algorithm", "queue_size", "codel_target", "codel_interval", "lifo",
		"window", "window_samples", "probe_interval", "probe_jitter", "probe_limit", "probe_length", "seed"}
	admissionBounds = []string{"initial_limit", "min_limit", "max_limit"}
	admissionOwn    = map[string][]string{
		AlgorithmGradient2: {"smoothing", "tolerance", "long_window", "short_window"},
		AlgorithmVegas:     {"smoothing", "probe_multiplier"},
		AlgorithmAIMD:      {"backoff_ratio", "timeout"},
		AlgorithmFixed:     {"limit"},
	}
)

// admissionFields returns the fields of an admission block of algorithm
// alg ("": of any algorithm).
func admissionFields(alg string) []string {
	out := append([]string(nil), admissionCommon...)
	for _, a := range admissionAlgorithms {
		if alg != "" && a != alg {
			continue
		}
		if a != AlgorithmFixed {
			out = appendNew(out, admissionBounds...)
		}
		out = appendNew(out, admissionOwn[a]...)
	}
	return out
}

func appendNew(list []string, add ...string) []string {
	for _, s := range add {
		if !contains(list, s) {
			list = append(list, s)
		}
	}
	return list
}

// AdmissionSpec is one named block of the file's admission mapping: the
// server-side admission control (an admission.Limiter) of one server or
// endpoint, which Registry.Admission serves.
type AdmissionSpec struct {
	// Name is the block's key under the file's admission mapping, the
	// name Registry.Admission serves it by.
	Name string
	// Algorithm is AlgorithmGradient2 (when the file leaves it out),
	// AlgorithmVegas, AlgorithmAIMD or AlgorithmFixed; the config of that
	// algorithm below applies.
	Algorithm string
	// Config is the Limiter's config without its Limit and Clock:
	// queue_size (QueueLength; none: -1), codel_target (QueueTarget),
	// codel_interval (QueueInterval), lifo (false: FIFO), window,
	// window_samples, probe_interval (never: -1), probe_jitter (0: -1,
	// none), probe_limit, probe_length (ProbeLength; left out: one
	// window), seed (Seed, and the Vegas config's Seed; left out: a seed
	// drawn at random for each Limiter).
	Config admission.Config
	// Gradient2, Vegas, AIMD and Fixed are the configs of the four
	// algorithms; NewLimiter uses the one Algorithm names. Fields the file
	// leaves out are zero (the admission package's defaults).
	Gradient2 admission.Gradient2Config
	Vegas     admission.VegasConfig
	AIMD      admission.AIMDConfig
	Fixed     admission.Fixed
}

// NewLimiter builds the admission.Limiter s describes, on clk (nil:
// clock.Real). It fails only for a spec that Parse did not make.
func (s *AdmissionSpec) NewLimiter(clk clock.Clock) (*admission.Limiter, error) {
	c := s.Config
	c.Clock = clk
	switch s.Algorithm {
	case AlgorithmVegas:
		v, err := admission.NewVegas(s.Vegas)
		if err != nil {
			return nil, err
		}
		c.Limit = v
	case AlgorithmAIMD:
		a, err := admission.NewAIMD(s.AIMD)
		if err != nil {
			return nil, err
		}
		c.Limit = a
	case AlgorithmFixed:
		c.Limit = s.Fixed
	default:
		g, err := admission.NewGradient2(s.Gradient2)
		if err != nil {
			return nil, err
		}
		c.Limit = g
	}
	return admission.New(c)
}

// key identifies the settings of s: a Limiter is kept across a reload
// while its key is unchanged.
func (s *AdmissionSpec) key() string {
	c := s.Config
	c.Limit, c.Clock, c.Rand = nil, nil, nil
	return fmt.Sprintf("%s %+v %+v %+v %+v %+v", s.Algorithm, c, s.Gradient2, s.Vegas, s.AIMD, s.Fixed)
}

// admission decodes the file's admission mapping of names to blocks.
func (d *decoder) admission(n *yaml.Node, path string) map[string]*AdmissionSpec {
	out := map[string]*AdmissionSpec{}
	d.fields(n, path, nil, func(name string, v *yaml.Node, p string) {
		if s := d.admissionBlock(name, v, p); s != nil {
			out[name] = s
		}
	})
	return out
}

// limitField reads a concurrency limit: a whole number from 1 to
// admission.MaxMaxLimit.
func (d *decoder) limitField(n *yaml.Node, path string) int {
	s, ok := d.scalar(n, path)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(strings.TrimSpace(s))
	switch {
	case err != nil:
		d.fail(n, path, "%q is not a whole number", s)
		return 0
	case v < 1:
		d.fail(n, path, "%d is refused: a limit must be at least 1 (a limit of none would admit nothing, and none is no protection; leave the field out for the default)", v)
		return 0
	case v > admission.MaxMaxLimit:
		d.fail(n, path, "%d is above the largest limit, %d", v, admission.MaxMaxLimit)
		return 0
	}
	return v
}

// positive reads a duration that must be above 0; 0 is refused with the
// default named.
func (d *decoder) positive(n *yaml.Node, path string, def time.Duration) time.Duration {
	return d.positiveSaid(n, path, def.String())
}

// positiveSaid is positive with the default described by def.
func (d *decoder) positiveSaid(n *yaml.Node, path string, def string) time.Duration {
	before := len(d.problems)
	v := d.duration(n, path)
	if v == 0 && len(d.problems) == before {
		d.fail(n, path, "0 is refused: it must be positive (leave the field out for the default, %s)", def)
	}
	return v
}

// admissionBlock decodes one admission block; nil when it is not a
// mapping.
func (d *decoder) admissionBlock(name string, n *yaml.Node, path string) *AdmissionSpec {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "must be a mapping, not %s", describe(n))
		return nil
	}
	s := &AdmissionSpec{Name: name, Algorithm: AlgorithmGradient2}
	alg := AlgorithmGradient2
	if v := valueOf(n, "algorithm"); v != nil {
		alg = d.oneOf(v, join(path, "algorithm"), admissionAlgorithms)
		if alg == "" { // reported; judge the other fields against any algorithm
			s.Algorithm = ""
		} else {
			s.Algorithm = alg
		}
	}
	known := admissionFields(alg)
	var initial, lo, hi int
	var loNode *yaml.Node
	var smoothing float64
	c := &s.Config
	d.fields(n, path, admissionFields(""), func(key string, v *yaml.Node, fp string) {
		if !contains(known, key) {
			d.fail(v, fp, "does not apply to algorithm %s (its fields: %s)", alg, strings.Join(sorted(known), ", "))
			return
		}
		switch key {
		case "algorithm": // read above
		case "initial_limit":
			initial = d.limitField(v, fp)
		case "min_limit":
			lo, loNode = d.limitField(v, fp), v
		case "max_limit":
			hi = d.limitField(v, fp)
		case "limit":
			s.Fixed.N = d.limitField(v, fp)
		case "queue_size":
			sv, ok := d.scalar(v, fp)
			if !ok {
				return
			}
			if sv == "none" {
				c.QueueLength = -1
				return
			}
			if sv == "0" {
				d.fail(v, fp, "0 is refused: write none for no queue (a request beyond the limit is shed at once), or leave the field out for the default (%d)", admission.DefaultQueueLength)
				return
			}
			c.QueueLength = d.integer(v, fp, 1, 1<<30)
		case "codel_target":
			c.QueueTarget = d.positive(v, fp, admission.DefaultQueueTarget)
		case "codel_interval":
			c.QueueInterval = d.positive(v, fp, admission.DefaultQueueInterval)
		case "lifo":
			c.FIFO = !d.boolean(v, fp)
		case "window":
			c.Window = d.positive(v, fp, admission.DefaultWindow)
		case "window_samples":
			c.WindowSamples = d.integer(v, fp, 1, 1<<30)
		case "probe_interval":
			if sv, ok := d.scalar(v, fp); ok && sv == "never" {
				c.ProbeInterval = -1
				return
			}
			c.ProbeInterval = d.positive(v, fp, admission.DefaultProbeInterval)
		case "probe_jitter":
			if c.ProbeJitter = d.number(v, fp, 0, 1, false); c.ProbeJitter == 0 {
				c.ProbeJitter = -1 // 0 in the file: no jitter
			}
		case "probe_limit":
			c.ProbeLimit = d.limitField(v, fp)
		case "probe_length":
			before := len(d.problems)
			if c.ProbeLength = d.duration(v, fp); c.ProbeLength == 0 && len(d.problems) == before {
				d.fail(v, fp, "0 is refused: it must be positive (leave the field out for one window)")
			}
		case "seed":
			sv, ok := d.scalar(v, fp)
			if !ok {
				return
			}
			u, err := strconv.ParseUint(strings.TrimSpace(sv), 10, 64)
			switch {
			case err != nil:
				d.fail(v, fp, "%q is not a whole number from 1 to %d", sv, uint64(math.MaxUint64))
			case u == 0:
				d.fail(v, fp, "0 is refused: leave the field out for a seed drawn at random for each limiter (so that servers started together probe apart)")
			default:
				c.Seed, s.Vegas.Seed = u, u
			}
		case "smoothing":
			smoothing = d.number(v, fp, 0, 1, true)
		case "tolerance":
			s.Gradient2.Tolerance = d.number(v, fp, 1, math.MaxFloat64, false)
		case "long_window":
			s.Gradient2.LongWindow = d.integer(v, fp, 1, 1<<30)
		case "short_window":
			s.Gradient2.ShortWindow = d.integer(v, fp, 1, 1<<30)
		case "probe_multiplier":
			if sv, ok := d.scalar(v, fp); ok && sv == "never" {
				s.Vegas.ProbeMultiplier = -1
				return
			}
			s.Vegas.ProbeMultiplier = d.integer(v, fp, 1, 1<<20)
		case "backoff_ratio":
			if r := d.number(v, fp, 0, 1, true); r == 1 {
				d.fail(v, fp, "1 is refused: a drop must shrink the limit (want a fraction above 0 and below 1)")
			} else {
				s.AIMD.BackoffRatio = r
			}
		case "timeout":
			s.AIMD.Timeout = d.positive(v, fp, admission.DefaultAIMDTimeout)
		}
	})
	if s.Algorithm == "" {
		return s
	}
	if lo > 0 && hi > 0 && lo > hi {
		d.fail(loNode, join(path, "min_limit"), "%d is above max_limit (%d)", lo, hi)
	}
	target, interval := c.QueueTarget, c.QueueInterval
	if interval == 0 {
		interval = admission.DefaultQueueInterval
	}
	if target == 0 {
		// as admission.Config: the default, but never above the interval
		target = min(admission.DefaultQueueTarget, interval)
	}
	if target > interval {
		tn := valueOf(n, "codel_target")
		d.fail(tn, join(path, "codel_target"), "%v is above codel_interval (%v): a request may wait less while a queue stands than while it is passing, so the target must not exceed the interval", target, interval)
	}
	switch s.Algorithm {
	case AlgorithmGradient2:
		g := &s.Gradient2
		g.InitialLimit, g.MinLimit, g.MaxLimit, g.Smoothing = initial, lo, hi, smoothing
	case AlgorithmVegas:
		v := &s.Vegas
		v.InitialLimit, v.MinLimit, v.MaxLimit, v.Smoothing = initial, lo, hi, smoothing
	case AlgorithmAIMD:
		a := &s.AIMD
		a.InitialLimit, a.MinLimit, a.MaxLimit = initial, lo, hi
	case AlgorithmFixed:
		if valueOf(n, "limit") == nil {
			d.fail(n, path, "algorithm fixed needs limit (the number of requests served at once)")
		}
	}
	if !d.hasProblemsUnder(path) {
		// What the fields cannot show alone (initial_limit outside the
		// bounds, short_window above long_window): the package's own
		// check, at the block.
		if _, err := s.NewLimiter(nil); err != nil {
			d.fail(n, path, "%v", err)
		}
	}
	return s
}

// hasProblemsUnder reports whether a problem was found at path or below.
func (d *decoder) hasProblemsUnder(path string) bool {
	for _, p := range d.problems {
		if p.Path == path || strings.HasPrefix(p.Path, path+".") {
			return true
		}
	}
	return false
}

// AdmissionWatcher is implemented by observers that export an admission
// Limiter's state (promretry's Collector and otelretry's Observer). A
// Registry whose Options.Observer implements it (or holds one in a
// retry.Multi) calls WatchAdmission with each Limiter an AdmissionHandle
// serves, when the handle is made and when a reload gives it a new one.
type AdmissionWatcher interface {
	// WatchAdmission is told that the AdmissionHandle of name (the
	// admission block's name) now serves l. The function returned, if not
	// nil, is called once when the handle stops serving l, before the
	// next Limiter is watched. A panic in either is recovered and logged.
	WatchAdmission(name string, l *admission.Limiter) (unwatch func())
}

// AdmissionHandle serves the admission.Limiter of one name of the file's
// admission mapping, following reloads. Keep it and call Limiter (one
// atomic load) or serve through Handler.
type AdmissionHandle struct {
	name string
	l    atomic.Pointer[admission.Limiter]
	// guarded by the Registry's mu
	key     string // the settings l was built with ("": the defaults)
	unwatch []func()
}

// Name returns the name the handle was asked for.
func (h *AdmissionHandle) Name() string { return h.name }

// Limiter returns the Limiter in force. It is never nil.
func (h *AdmissionHandle) Limiter() *admission.Limiter { return h.l.Load() }

// Admission returns the handle for name in the file's admission mapping.
// Repeated calls return the same handle. A name the file in force does
// not list (or no file yet) gets a Limiter of the default settings
// (admission.Config{}: Gradient2 behind a CoDel queue), never none.
//
// On a reload, a block whose settings are unchanged keeps its Limiter,
// with what it has in flight and its limit; a block whose settings
// changed, or that the file no longer lists, gets a new Limiter (the
// defaults for a block dropped), which admits from then on. The old
// Limiter is not stopped: every permit it gave is released to it, so its
// requests finish under the old limit and a request queued in it is still
// served as those release; its requests do not count against the new
// limit, so while they finish the two together may serve more than
// either limit. Observers implementing AdmissionWatcher are told each new
// Limiter (a panic of theirs is recovered and logged; the Limiter serves
// without metrics).
func (r *Registry) Admission(name string) *AdmissionHandle {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.admission[name]; ok {
		return h
	}
	if r.admission == nil {
		r.admission = map[string]*AdmissionHandle{}
	}
	h := &AdmissionHandle{name: name}
	r.setAdmission(h, r.file)
	r.admission[name] = h
	return h
}

// applyAdmission gives every admission handle the Limiter of f. It must
// be called with r.mu held, once f is in force.
func (r *Registry) applyAdmission(f *File) {
	for _, h := range r.admission {
		r.setAdmission(h, f)
	}
}

// setAdmission gives h the Limiter f's block for its name describes,
// keeping the one it has when the settings are unchanged.
func (r *Registry) setAdmission(h *AdmissionHandle, f *File) {
	var spec *AdmissionSpec
	if f != nil {
		spec = f.Admission[h.name]
	}
	key := ""
	if spec != nil {
		key = spec.key()
	}
	if h.l.Load() != nil && h.key == key {
		return
	}
	var l *admission.Limiter
	var err error
	if spec != nil {
		l, err = spec.NewLimiter(r.opts.Clock)
	}
	if spec == nil || err != nil {
		if err != nil { // not from Parse: serve the defaults rather than nothing
			r.logger().Error("config: admission block not buildable; serving the default settings", "name", h.name, "error", err)
			key = ""
		}
		l, _ = admission.New(admission.Config{Clock: r.opts.Clock})
	}
	for _, un := range h.unwatch {
		r.safeCall("unwatch", h.name, un)
	}
	h.unwatch = h.unwatch[:0]
	h.key = key
	h.l.Store(l)
	retry.EachObserver(r.opts.Observer, func(o retry.Observer) {
		if w, ok := o.(AdmissionWatcher); ok {
			r.safeCall("WatchAdmission", h.name, func() {
				if un := w.WatchAdmission(h.name, l); un != nil {
					h.unwatch = append(h.unwatch, un)
				}
			})
		}
	})
}

// safeCall runs an observer's f, logging a panic instead of letting it
// undo a reload already in force.
func (r *Registry) safeCall(what, name string, f func()) {
	defer func() {
		if v := recover(); v != nil {
			r.logger().Error("config: admission watcher panicked", "call", what, "name", name, "panic", v)
		}
	}()
	f()
}

// Handler returns an http.Handler that serves each request with next as
// layer.Adaptive does, through the Limiter h has in force when the
// request arrives, so that it follows reloads. opts are layer.Adaptive's
// (WithRetryAfter: the shed answer's Retry-After; a Middleware around the
// returned handler does not lend its own, as it does to layer.Adaptive
// directly). It costs what layer.Adaptive costs, plus an atomic load.
func (h *AdmissionHandle) Handler(next http.Handler, opts ...layer.Option) http.Handler {
	return &admissionHandler{h: h, next: next, opts: opts}
}

type admissionHandler struct {
	h    *AdmissionHandle
	next http.Handler
	opts []layer.Option
	cur  atomic.Pointer[adaptiveFor]
}

// adaptiveFor is layer.Adaptive over one Limiter.
type adaptiveFor struct {
	l *admission.Limiter
	h http.Handler
}

func (a *admissionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l := a.h.Limiter()
	c := a.cur.Load()
	if c == nil || c.l != l {
		c = &adaptiveFor{l: l, h: layer.Adaptive(l, a.next, a.opts...)}
		a.cur.Store(c)
	}
	c.h.ServeHTTP(w, r)
}
