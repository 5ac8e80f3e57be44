package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/throttle"
)

// A scenario file describes a sim.Model and the policies to compare on it.
// Durations are Go durations ("250ms", "1m30s"); distributions use
// sim.ParseDist's syntax ("exp(10ms)", "normal(10ms,2ms)"). Unknown keys
// are errors. See testdata/example.yaml.
type fileSpec struct {
	Name        string      `yaml:"name"`
	Title       string      `yaml:"title"`
	Description string      `yaml:"description"`
	Clients     int         `yaml:"clients"`
	Arrival     fileArrival `yaml:"arrival"`
	Duration    dur         `yaml:"duration"`
	Drain       dur         `yaml:"drain"`
	Warmup      dur         `yaml:"warmup"`
	Tiers       []fileTier  `yaml:"tiers"`
	Faults      []fileFault `yaml:"faults"`
	Measure     string      `yaml:"measure"`
	Params      fileParams  `yaml:"params"`
	Policies    []string    `yaml:"policies"`
	Custom      []filePol   `yaml:"custom"`
	Columns     []string    `yaml:"columns"`
	Trials      int         `yaml:"trials"`
}

type fileArrival struct {
	Poisson float64 `yaml:"poisson"` // calls per second per client
	Every   dur     `yaml:"every"`   // periodic interval
}

type fileTier struct {
	Name    string       `yaml:"name"`
	Workers int          `yaml:"workers"`
	Queue   int          `yaml:"queue"`
	Service dist         `yaml:"service"`
	Latency dist         `yaml:"latency"`
	Fail    float64      `yaml:"fail"`
	Timeout dur          `yaml:"timeout"`
	Degrade *fileDegrade `yaml:"degrade"`
}

type fileDegrade struct {
	Knee  int     `yaml:"knee"`
	Slope float64 `yaml:"slope"`
	Max   float64 `yaml:"max"`
}

type fileFault struct {
	Kind   string  `yaml:"kind"`
	Tier   string  `yaml:"tier"`
	Start  dur     `yaml:"start"`
	End    dur     `yaml:"end"`
	Prob   float64 `yaml:"prob"`
	Factor float64 `yaml:"factor"`
	Extra  dist    `yaml:"extra"`
}

type fileParams struct {
	MaxAttempts int          `yaml:"max_attempts"`
	Base        dur          `yaml:"base"`
	Max         dur          `yaml:"max"`
	Interval    dur          `yaml:"interval"`
	Timeout     dur          `yaml:"timeout"`
	MaxElapsed  dur          `yaml:"max_elapsed"`
	Budget      *fileBudget  `yaml:"budget"`
	Breaker     *fileBreaker `yaml:"breaker"`
}

// filePol is a user's own policy. Either the fields apply to the clients'
// calls, or Hops lists one policy per tier (hop i calls tier i).
type filePol struct {
	Name    string    `yaml:"name"`
	Hops    []fileHop `yaml:"hops"`
	fileHop `yaml:",inline"`
}

// fileHop is one caller's policy. Keys that config's policy file has
// (max_attempts, backoff, max_elapsed, budget, breaker, limiter, hedge,
// nested) mean what they mean there, with retry.Policy's defaults: no
// max_attempts is 3 attempts (-1: no count limit, with max_elapsed), no
// backoff is retry.DefaultBackoff, no nested is the layer rule
// (one_layer).
type fileHop struct {
	MaxAttempts        int          `yaml:"max_attempts"`
	Backoff            *fileBackoff `yaml:"backoff"`
	Timeout            dur          `yaml:"timeout"`
	MaxElapsed         dur          `yaml:"max_elapsed"`
	MinAttemptTime     dur          `yaml:"min_attempt_time"`
	Budget             *fileBudget  `yaml:"budget"`
	Breaker            *fileBreaker `yaml:"breaker"`
	BreakerRetriesOnly bool         `yaml:"breaker_retries_only"`
	Limiter            *fileLimiter `yaml:"limiter"`
	Hedge              *fileHedge   `yaml:"hedge"`
	Nested             string       `yaml:"nested"`
	OverloadMarker     bool         `yaml:"overload_marker"`
}

// fileLimiter is config's limiter block: throttle.SREConfig (kind sre)
// or throttle.AdaptiveConfig (kind aws_adaptive) fields.
type fileLimiter struct {
	Kind string `yaml:"kind"`
	// sre
	K            float64 `yaml:"k"`
	Window       dur     `yaml:"window"`
	Buckets      int     `yaml:"buckets"`
	MaxRejection float64 `yaml:"max_rejection"`
	MinRequests  int     `yaml:"min_requests"`
	// aws_adaptive
	Beta          float64 `yaml:"beta"`
	ScaleConstant float64 `yaml:"scale_constant"`
	Smoothing     float64 `yaml:"smoothing"`
	MinFillRate   float64 `yaml:"min_fill_rate"`
}

// fileHedge is config's hedge block.
type fileHedge struct {
	Delay     dur           `yaml:"delay"`
	MaxHedges int           `yaml:"max_hedges"`
	Adaptive  *fileAdaptive `yaml:"adaptive"`
}

// fileAdaptive is hedge.AdaptiveConfig's fields.
type fileAdaptive struct {
	Percentile float64 `yaml:"percentile"`
	Window     dur     `yaml:"window"`
	Floor      dur     `yaml:"floor"`
	Max        dur     `yaml:"max"`
	MinSamples int     `yaml:"min_samples"`
}

type fileBackoff struct {
	Strategy   string  `yaml:"strategy"` // a backoff registry name: exponential, full_jitter, constant ...
	Base       dur     `yaml:"base"`
	Max        dur     `yaml:"max"`
	Step       dur     `yaml:"step"`
	Multiplier float64 `yaml:"multiplier"`
	Jitter     string  `yaml:"jitter"`
	Factor     float64 `yaml:"factor"`
}

type fileBudget struct {
	Kind string `yaml:"kind"` // ratio (default), window, concurrency
	// ratio
	MaxTokens   float64 `yaml:"max_tokens"`
	Refill      float64 `yaml:"refill"`
	RetryCost   float64 `yaml:"retry_cost"`
	FailureCost float64 `yaml:"failure_cost"`
	Threshold   float64 `yaml:"threshold"`
	StartEmpty  bool    `yaml:"start_empty"`
	// window and concurrency
	Ratio               float64 `yaml:"ratio"`
	Window              dur     `yaml:"window"`
	MinRetriesPerSecond float64 `yaml:"min_retries_per_second"`
	MinConcurrency      int     `yaml:"min_concurrency"`
}

type fileBreaker struct {
	Consecutive  int     `yaml:"consecutive"`
	FailureRatio float64 `yaml:"failure_ratio"`
	Window       dur     `yaml:"window"`
	Calls        int     `yaml:"calls"`
	MinCalls     int     `yaml:"min_calls"`
	Open         dur     `yaml:"open"`
	MaxOpen      dur     `yaml:"max_open"`
	Probes       int     `yaml:"probes"`
}

// dur is a time.Duration read from "250ms" or "1m".
type dur time.Duration

// UnmarshalYAML reads a duration string.
func (d *dur) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a duration like 250ms", n.Line)
	}
	v, err := parseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = dur(v)
	return nil
}

// dist is a sim.Dist read from its text form.
type dist struct {
	d   sim.Dist
	set bool
}

// UnmarshalYAML reads a distribution string.
func (d *dist) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a distribution like exp(10ms)", n.Line)
	}
	v, err := sim.ParseDist(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	d.d, d.set = v, true
	return nil
}

// errFile is wrapped by every scenario-file error.
var errFile = errors.New("stormsim: scenario file")

// maxFileSize bounds a scenario file.
const maxFileSize = 1 << 20

// parseScenarioFile reads a scenario file and builds its Scenario.
func parseScenarioFile(data []byte) (*sim.Scenario, error) {
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", errFile, maxFileSize)
	}
	var f fileSpec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: empty", errFile)
		}
		return nil, fmt.Errorf("%w: %w", errFile, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil || line == 0 {
			return nil, fmt.Errorf("%w: after the first YAML document: a scenario file holds exactly one (%v)", errFile, err)
		}
		return nil, fmt.Errorf("%w: line %d: a second YAML document; a scenario file holds exactly one", errFile, line)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%w: %w", errFile, err)
	}
	if err := checkQueues(&root); err != nil {
		return nil, fmt.Errorf("%w: %w", errFile, err)
	}
	if err := f.checkFaults(&root); err != nil {
		return nil, fmt.Errorf("%w: %w", errFile, err)
	}
	spec, err := f.spec()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errFile, err)
	}
	sc, err := sim.NewModelScenario(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errFile, err)
	}
	return sc, nil
}

// checkFaults refuses fault entries that would silently do nothing or
// more than they say, naming the line: loss or errors without prob, and
// capacity without factor (which would remove every worker) or on a tier
// whose workers are unlimited.
func (f *fileSpec) checkFaults(root *yaml.Node) error {
	faults := mappingValue(root, "faults")
	for i, ff := range f.Faults {
		var item *yaml.Node
		if faults != nil && faults.Kind == yaml.SequenceNode && i < len(faults.Content) {
			item = faults.Content[i]
		}
		line := 0
		if item != nil {
			line = item.Line
		}
		has := func(key string) bool { return mappingValue(item, key) != nil }
		switch ff.Kind {
		case "loss", "reply-loss", "errors":
			if !has("prob") {
				return fmt.Errorf("line %d: faults[%d]: a %s fault needs prob, the share of requests it hits (0 to 1]", line, i, ff.Kind)
			}
		case "capacity":
			if !has("factor") {
				return fmt.Errorf("line %d: faults[%d]: a capacity fault needs factor, the share of workers left (0 would remove them all; use kind unavailable for that)", line, i)
			}
			for ti, t := range f.Tiers {
				target := t.Name == ff.Tier || (ff.Tier == "" && ti == len(f.Tiers)-1)
				if target && t.Workers == 0 {
					return fmt.Errorf("line %d: faults[%d]: a capacity fault on tier %q, whose workers are unlimited, does nothing: give the tier workers", line, i, t.Name)
				}
			}
		}
	}
	return nil
}

// checkQueues refuses a tier's queue written as 0, naming the line: it
// reads two ways (a live scenario's Server.Limit.Queue and faultinject's
// Limit take 0 as no queue, sim.Tier as unlimited), so a file says which
// with -1 (no queue) or by leaving queue out (unlimited).
func checkQueues(root *yaml.Node) error {
	tiers := mappingValue(root, "tiers")
	if tiers == nil || tiers.Kind != yaml.SequenceNode {
		return nil
	}
	for i, t := range tiers.Content {
		if q := mappingValue(t, "queue"); q != nil && q.Kind == yaml.ScalarNode {
			if n, err := strconv.Atoi(strings.TrimSpace(q.Value)); err == nil && n == 0 {
				return fmt.Errorf("line %d: tiers[%d]: queue 0 reads two ways (no queue live and in faultinject, unlimited in sim): write -1 for no queue, or leave queue out for an unlimited one", q.Line, i)
			}
		}
	}
	return nil
}

// mappingValue returns the value node of key in the mapping n (or in the
// document n wraps), or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func (f *fileSpec) spec() (sim.ModelSpec, error) {
	m := sim.Model{
		Clients:  f.Clients,
		Duration: time.Duration(f.Duration),
		Drain:    time.Duration(f.Drain),
		Warmup:   time.Duration(f.Warmup),
		Measure:  f.Measure,
	}
	switch {
	case f.Arrival.Poisson > 0 && f.Arrival.Every > 0:
		return sim.ModelSpec{}, errors.New("arrival: set poisson or every, not both")
	case f.Arrival.Every > 0:
		m.Arrival = sim.Arrival{Kind: sim.Periodic, Interval: time.Duration(f.Arrival.Every)}
	default:
		m.Arrival = sim.Arrival{Kind: sim.Poisson, Rate: f.Arrival.Poisson}
	}
	tierIndex := map[string]int{}
	for i, t := range f.Tiers {
		if t.Name == "" {
			t.Name = fmt.Sprintf("tier%d", i)
		}
		if _, dup := tierIndex[t.Name]; dup {
			return sim.ModelSpec{}, fmt.Errorf("tier %q defined twice", t.Name)
		}
		tierIndex[t.Name] = i
		tier := sim.Tier{Name: t.Name, Workers: t.Workers, Queue: t.Queue, Service: t.Service.d,
			Latency: t.Latency.d, FailProb: t.Fail, Timeout: time.Duration(t.Timeout)}
		if t.Degrade != nil {
			tier.Degrade = sim.Degrade{Knee: t.Degrade.Knee, Slope: t.Degrade.Slope, MaxFactor: t.Degrade.Max}
		}
		m.Tiers = append(m.Tiers, tier)
	}
	for i, ff := range f.Faults {
		kind, ok := sim.ParseFaultKind(ff.Kind)
		if !ok {
			return sim.ModelSpec{}, fmt.Errorf("fault %d: unknown kind %q", i, ff.Kind)
		}
		ti := len(f.Tiers) - 1
		if ff.Tier != "" {
			if ti, ok = tierIndex[ff.Tier]; !ok {
				return sim.ModelSpec{}, fmt.Errorf("fault %d: no tier %q", i, ff.Tier)
			}
		}
		m.Faults = append(m.Faults, sim.Fault{Kind: kind, Tier: ti, Start: time.Duration(ff.Start), End: time.Duration(ff.End),
			Prob: ff.Prob, Factor: ff.Factor, Extra: ff.Extra.d})
	}
	params := sim.PolicyParams{
		MaxAttempts: f.Params.MaxAttempts, Base: time.Duration(f.Params.Base), Max: time.Duration(f.Params.Max),
		Interval: time.Duration(f.Params.Interval), AttemptTimeout: time.Duration(f.Params.Timeout),
		MaxElapsed: time.Duration(f.Params.MaxElapsed),
	}
	if f.Params.MaxAttempts < -1 || f.Params.MaxAttempts > 1000 {
		return sim.ModelSpec{}, errors.New("params: max_attempts must be in [-1, 1000]")
	}
	if b := f.Params.Budget; b != nil {
		if b.Kind != "" && b.Kind != "ratio" {
			return sim.ModelSpec{}, errors.New("params: the standard policies take a ratio budget")
		}
		rc := b.ratio()
		if err := rc.Validate(); err != nil {
			return sim.ModelSpec{}, fmt.Errorf("params: %w", err)
		}
		params.Budget = &rc
	}
	if b := f.Params.Breaker; b != nil {
		bc := b.config()
		if err := bc.Validate(); err != nil {
			return sim.ModelSpec{}, fmt.Errorf("params: %w", err)
		}
		params.Breaker = &bc
	}
	spec := sim.ModelSpec{
		Name: f.Name, Title: f.Title, Doc: f.Description, Model: m, Params: params,
		Policies: f.Policies, Columns: f.Columns, Trials: f.Trials,
	}
	if spec.Title == "" {
		spec.Title = f.Name
	}
	if f.Trials < 0 || f.Trials > 1_000_000 {
		return sim.ModelSpec{}, errors.New("trials must be in [0, 1000000]")
	}
	for _, p := range f.Custom {
		v, err := p.variant(len(f.Tiers))
		if err != nil {
			return sim.ModelSpec{}, err
		}
		spec.Custom = append(spec.Custom, v)
	}
	return spec, nil
}

func (p *filePol) variant(tiers int) (sim.Variant, error) {
	if p.Name == "" {
		return sim.Variant{}, errors.New("custom: a policy needs a name")
	}
	if _, std := sim.CanonicalPolicy(p.Name); std {
		return sim.Variant{}, fmt.Errorf("custom: %q is a standard policy name; pick another", p.Name)
	}
	hops := p.Hops
	if len(hops) == 0 {
		hops = []fileHop{p.fileHop}
	} else if !reflect.ValueOf(p.fileHop).IsZero() {
		return sim.Variant{}, fmt.Errorf("custom %s: give either hops or the policy fields, not both", p.Name)
	}
	if len(hops) > tiers {
		return sim.Variant{}, fmt.Errorf("custom %s: %d hops for %d tiers", p.Name, len(hops), tiers)
	}
	v := sim.Variant{Name: p.Name}
	var docs []string
	for i, h := range hops {
		pol, err := h.policy(p.Name)
		if err != nil {
			return sim.Variant{}, fmt.Errorf("custom %s hop %d: %w", p.Name, i, err)
		}
		v.Policies = append(v.Policies, pol)
		doc := h.doc()
		if len(hops) > 1 {
			doc = fmt.Sprintf("hop %d: %s", i+1, doc)
		}
		docs = append(docs, doc)
	}
	v.Doc = "from the scenario file: " + strings.Join(docs, "; ")
	if len(hops) > 1 && len(hops) < tiers {
		v.Doc += fmt.Sprintf("; hops %d to %d do not retry", len(hops)+1, tiers)
	}
	return v, nil
}

// doc describes the hop's policy in one line, for the policy legend.
func (h *fileHop) doc() string {
	var parts []string
	switch {
	case h.MaxAttempts < 0:
		parts = append(parts, "no attempt limit")
	case h.MaxAttempts == 0:
		parts = append(parts, fmt.Sprintf("%d attempts (retry.Policy's default)", retry.DefaultMaxAttempts))
	default:
		parts = append(parts, fmt.Sprintf("%d attempts", h.MaxAttempts))
	}
	if b := h.Backoff; b != nil {
		strategy := b.Strategy
		if strategy == "" {
			strategy = "exponential"
		}
		d := strategy + " backoff"
		var ps []string
		if b.Base > 0 {
			ps = append(ps, "base "+time.Duration(b.Base).String())
		}
		if b.Max > 0 {
			ps = append(ps, "max "+time.Duration(b.Max).String())
		}
		if b.Jitter != "" {
			ps = append(ps, b.Jitter+" jitter")
		}
		if len(ps) > 0 {
			d += " (" + strings.Join(ps, ", ") + ")"
		}
		parts = append(parts, d)
	} else {
		parts = append(parts, "retry.DefaultBackoff (exponential from 100ms, capped at 10s, full jitter)")
	}
	if h.MaxElapsed > 0 {
		parts = append(parts, "giving up after "+time.Duration(h.MaxElapsed).String())
	}
	if h.Timeout > 0 {
		parts = append(parts, "attempt timeout "+time.Duration(h.Timeout).String())
	}
	if h.Budget != nil {
		kind := h.Budget.Kind
		if kind == "" {
			kind = "ratio"
		}
		parts = append(parts, kind+" budget")
	}
	if h.Breaker != nil {
		b := "breaker"
		if h.BreakerRetriesOnly {
			b += " (retries only)"
		}
		parts = append(parts, b)
	}
	if l := h.Limiter; l != nil {
		parts = append(parts, l.Kind+" limiter")
	}
	if hd := h.Hedge; hd != nil {
		d := "hedging"
		if hd.Adaptive != nil {
			d += " after an adaptive delay"
		} else {
			d += " after " + time.Duration(hd.Delay).String()
		}
		parts = append(parts, d)
	}
	if h.Nested == "ignore" {
		parts = append(parts, "retrying whatever its caller does (nested: ignore)")
	}
	if h.OverloadMarker {
		parts = append(parts, "the tier it calls sheds with the overload marker")
	}
	return strings.Join(parts, ", ")
}

func (h *fileHop) policy(name string) (sim.Policy, error) {
	if h.MaxAttempts < -1 || h.MaxAttempts > 1000 {
		return sim.Policy{}, errors.New("max_attempts must be in [-1, 1000] (0 or none: 3, retry.Policy's default; -1: no count limit)")
	}
	if h.MaxAttempts == -1 && h.MaxElapsed <= 0 {
		return sim.Policy{}, errors.New("max_attempts -1 (no count limit) needs max_elapsed, or the calls would retry forever")
	}
	p := sim.Policy{
		Name: name, MaxAttempts: h.MaxAttempts, AttemptTimeout: time.Duration(h.Timeout),
		MaxElapsed: time.Duration(h.MaxElapsed), MinAttemptTime: time.Duration(h.MinAttemptTime),
		BreakerRetriesOnly: h.BreakerRetriesOnly, OverloadMarker: h.OverloadMarker,
	}
	switch h.MaxAttempts {
	case 0:
		p.MaxAttempts = retry.DefaultMaxAttempts // as retry.Policy reads 0
	case -1:
		p.MaxAttempts = 0 // sim's "no count limit"
	}
	switch h.Nested {
	case "", "one_layer":
		p.LayerRule = true // retry.Policy's default, NestedOneLayer
	case "ignore":
	case "budget":
		return sim.Policy{}, errors.New("nested: rule budget is not modelled by the simulator (one_layer or ignore)")
	default:
		return sim.Policy{}, fmt.Errorf("nested: unknown rule %q (one_layer, ignore)", h.Nested)
	}
	if l := h.Limiter; l != nil {
		lim, err := l.limiter()
		if err != nil {
			return sim.Policy{}, fmt.Errorf("limiter: %w", err)
		}
		p.Limiter = lim
	}
	if hd := h.Hedge; hd != nil {
		switch {
		case h.Limiter != nil:
			return sim.Policy{}, errors.New("hedge beside a limiter: hedge.Do does not hedge such a policy")
		case hd.Delay < 0 || (hd.Delay == 0 && hd.Adaptive == nil):
			return sim.Policy{}, errors.New("hedge: needs a positive delay, or adaptive")
		case hd.MaxHedges < 0 || (p.MaxAttempts > 0 && hd.MaxHedges > p.MaxAttempts-1):
			return sim.Policy{}, fmt.Errorf("hedge: max_hedges must be in [0, max_attempts - 1 = %d]", p.MaxAttempts-1)
		}
		sh := &sim.Hedge{Delay: time.Duration(hd.Delay), MaxHedges: hd.MaxHedges}
		if a := hd.Adaptive; a != nil {
			c := hedge.AdaptiveConfig{Percentile: a.Percentile, Window: time.Duration(a.Window), Floor: time.Duration(a.Floor),
				Max: time.Duration(a.Max), MinSamples: a.MinSamples}
			if c.Percentile < 0 || c.Percentile >= 1 || c.Window < 0 || c.Floor < 0 || c.Max < 0 || c.MinSamples < 0 {
				return sim.Policy{}, errors.New("hedge: adaptive: percentile in [0, 1), window, floor, max and min_samples not negative")
			}
			if c.Max > 0 && c.Max < max(c.Floor, hedge.DefaultFloor) {
				return sim.Policy{}, errors.New("hedge: adaptive: max below the floor")
			}
			sh.Adaptive = &c
		}
		p.Hedge = sh
	}
	b := h.Backoff
	if b == nil {
		// retry.Policy's nil Backoff: retry.DefaultBackoff, with the run's
		// random source for its jitter.
		b = &fileBackoff{Strategy: "exponential", Base: dur(100 * time.Millisecond), Max: dur(10 * time.Second), Jitter: "full"}
	}
	{
		params := backoff.Params{Base: time.Duration(b.Base), Max: time.Duration(b.Max), Step: time.Duration(b.Step),
			Multiplier: b.Multiplier, Factor: b.Factor}
		if b.Jitter != "" {
			j, ok := backoff.ParseJitter(b.Jitter)
			if !ok {
				return sim.Policy{}, fmt.Errorf("unknown jitter %q", b.Jitter)
			}
			params.Jitter = j
		}
		strategy := b.Strategy
		if strategy == "" {
			strategy = "exponential"
		}
		// Build once now to report errors early; each run builds its own
		// with the run's random source.
		if _, err := backoff.New(strategy, params); err != nil {
			return sim.Policy{}, err
		}
		p.Backoff = func(src rand.Source) backoff.Strategy {
			params := params
			params.Rand = src
			s, err := backoff.New(strategy, params)
			if err != nil {
				panic(err) // checked above
			}
			return s
		}
	}
	if b := h.Budget; b != nil {
		switch strings.ToLower(b.Kind) {
		case "", "ratio":
			c := b.ratio()
			if err := c.Validate(); err != nil {
				return sim.Policy{}, err
			}
			p.Budget = sim.RatioBudget(c)
		case "window":
			c := budget.WindowConfig{Window: time.Duration(b.Window), Ratio: b.Ratio, MinRetriesPerSecond: b.MinRetriesPerSecond}
			if err := c.Validate(); err != nil {
				return sim.Policy{}, err
			}
			p.Budget = sim.WindowBudget(c)
		case "concurrency":
			c := budget.ConcurrencyConfig{Ratio: b.Ratio, MinConcurrency: b.MinConcurrency}
			if err := c.Validate(); err != nil {
				return sim.Policy{}, err
			}
			p.Budget = sim.ConcurrencyBudget(c)
		default:
			return sim.Policy{}, fmt.Errorf("unknown budget kind %q (ratio, window, concurrency)", b.Kind)
		}
	}
	if b := h.Breaker; b != nil {
		c := b.config()
		if err := c.Validate(); err != nil {
			return sim.Policy{}, err
		}
		p.Breaker = sim.Breaker(c)
	}
	return p, nil
}

// limiter builds the limiter block as config does: throttle's Validate
// checks the fields, and fields left out take throttle's defaults.
func (l *fileLimiter) limiter() (func(sim.Env) retry.Limiter, error) {
	switch strings.ReplaceAll(l.Kind, "-", "_") {
	case "sre":
		if l.Beta != 0 || l.ScaleConstant != 0 || l.Smoothing != 0 || l.MinFillRate != 0 {
			return nil, errors.New("beta, scale_constant, smoothing and min_fill_rate are aws_adaptive's")
		}
		c := throttle.SREConfig{K: l.K, Window: time.Duration(l.Window), Buckets: l.Buckets, MaxRejection: l.MaxRejection, MinRequests: l.MinRequests}
		if err := c.Validate(); err != nil {
			return nil, err
		}
		return sim.SRELimiter(c), nil
	case "aws_adaptive":
		if l.K != 0 || l.Window != 0 || l.Buckets != 0 || l.MaxRejection != 0 || l.MinRequests != 0 {
			return nil, errors.New("k, window, buckets, max_rejection and min_requests are sre's")
		}
		c := throttle.AdaptiveConfig{Beta: l.Beta, ScaleConstant: l.ScaleConstant, Smoothing: l.Smoothing, MinFillRate: l.MinFillRate}
		if err := c.Validate(); err != nil {
			return nil, err
		}
		return sim.AdaptiveLimiter(c), nil
	case "":
		return nil, errors.New("kind missing: sre or aws_adaptive")
	}
	return nil, fmt.Errorf("unknown kind %q (sre, aws_adaptive)", l.Kind)
}

func (b *fileBudget) ratio() budget.RatioConfig {
	return budget.RatioConfig{MaxTokens: b.MaxTokens, Refill: b.Refill, RetryCost: b.RetryCost,
		FailureCost: b.FailureCost, Threshold: b.Threshold, StartEmpty: b.StartEmpty}
}

func (b *fileBreaker) config() breaker.Config {
	c := breaker.Config{ConsecutiveFailures: b.Consecutive, OpenTimeout: time.Duration(b.Open),
		MaxOpenTimeout: time.Duration(b.MaxOpen), MaxProbes: b.Probes}
	if b.FailureRatio > 0 || b.Window > 0 || b.Calls > 0 {
		c.Window = breaker.Window{Duration: time.Duration(b.Window), Calls: b.Calls,
			FailureRatio: b.FailureRatio, MinCalls: b.MinCalls}
	}
	return c
}
