package config

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/httpretry"
	kg "github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
	"go.yaml.in/yaml/v3"
)

// KeySpec splits a part of a policy (its breaker, budget, nested budget,
// limiter or hedge delay) per key: the Registry builds a group of parts
// (package keyed), one per key, each with the block's settings, and each
// call uses the member of its key (keyed.KeyFrom of the call's context,
// which the adapters set). A block without per (or with per: none) is one
// part shared by every call, as before.
type KeySpec struct {
	// Per is what the key is, PerHost or PerMethod. It tells the adapter
	// which key to give calls (Handle.HTTPKey, Handle.KeyPer); the group
	// itself uses whatever key the call's context carries.
	Per string
	// MaxKeys bounds the live members (keyed.Config.MaxKeys): 1 to
	// keyed.MaxMaxKeys; 0 when the file leaves max_keys out, meaning
	// keyed.DefaultMaxKeys.
	MaxKeys int
	// Idle is how long a member may go unused before it is removed
	// (keyed.Config.Idle): positive, at most MaxDuration; 0 when the file
	// leaves idle out, meaning keyed.DefaultIdle.
	Idle time.Duration
}

// The values of per.
const (
	// PerHost keys calls by their downstream host: for HTTP the request
	// URL's scheme, host and port (httpretry.HostKey); for gRPC the
	// connection's target (grpcretry.KeyByTarget).
	PerHost = "host"
	// PerMethod keys calls by what they call: for gRPC the full method
	// name ("/pkg.Service/Method", grpcretry.KeyByMethod); for HTTP the
	// request's method, scheme, host, port and path, without the query
	// (HTTPMethodKey: "GET https://api.example.com:443/v1/charges").
	PerMethod = "method"
	// PerNone is one part for every call: the same as leaving per out.
	PerNone = "none"
)

// keyConfig returns the keyed.Config of s on the Registry's clock.
func (r *Registry) keyConfig(s *KeySpec) kg.Config {
	return kg.Config{MaxKeys: s.MaxKeys, Idle: s.Idle, Clock: r.opts.Clock}
}

// String identifies s's settings, for the keys of kept parts.
func (s *KeySpec) String() string {
	if s == nil {
		return "per=none"
	}
	return fmt.Sprintf("per=%s max_keys=%d idle=%v", s.Per, s.MaxKeys, s.Idle)
}

// keySpec reads per, max_keys and idle from the block n at path; nil when
// the block splits nothing per key (problems reported).
func (d *decoder) keySpec(n *yaml.Node, path string) *KeySpec {
	pv, mv, iv := valueOf(n, "per"), valueOf(n, "max_keys"), valueOf(n, "idle")
	if pv == nil && mv == nil && iv == nil {
		return nil
	}
	ks := &KeySpec{}
	before := len(d.problems)
	if pv != nil {
		ks.Per = d.oneOf(pv, join(path, "per"), []string{PerHost, PerMethod, PerNone})
	}
	if mv != nil {
		ks.MaxKeys = d.maxKeys(mv, join(path, "max_keys"))
	}
	if iv != nil {
		reported := len(d.problems)
		ks.Idle = d.duration(iv, join(path, "idle"))
		if ks.Idle == 0 && len(d.problems) == reported {
			d.fail(iv, join(path, "idle"), "must be positive (leave idle out for the default, %s)", fmtDuration(kg.DefaultIdle))
		}
	}
	if len(d.problems) > before {
		return nil
	}
	if ks.Per == "" || ks.Per == PerNone {
		at, field := mv, "max_keys"
		if at == nil {
			at, field = iv, "idle"
		}
		if at != nil {
			why := "without per, one part serves every call"
			if ks.Per == PerNone {
				why = "per: none is one part for every call"
			}
			d.fail(at, join(path, field), "applies only with per: host or per: method (%s)", why)
		}
		return nil
	}
	return ks
}

// maxKeys reads max_keys: 1 to keyed.MaxMaxKeys.
func (d *decoder) maxKeys(n *yaml.Node, path string) int {
	s, ok := d.scalar(n, path)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(s)
	switch {
	case err != nil:
		d.fail(n, path, "%q is not a whole number", s)
	case v == 0:
		d.fail(n, path, "0 keys isolate nothing: leave max_keys out for the default (%d keys), or give 1 to %d", kg.DefaultMaxKeys, kg.MaxMaxKeys)
	case v < 1 || v > kg.MaxMaxKeys:
		d.fail(n, path, "%d is outside [1, %d] (the most live keys a group holds, keyed.MaxMaxKeys)", v, kg.MaxMaxKeys)
	default:
		return v
	}
	return 0
}

// checkKeys reads the per-key settings of p's blocks (in the policy
// mapping n at path) into their specs, and refuses what cannot be
// honoured: keyed parts of one policy keyed by different things (a call
// carries one key), and a fixed hedge delay per key. A part shared by the
// fleet may be split per key; its store must be a KeyedSharedStore, which
// the Registry checks when it builds the part.
func (d *decoder) checkKeys(p *PolicySpec, n *yaml.Node, path string) {
	if n.Kind != yaml.MappingNode {
		return
	}
	var per, perPath string
	visit := func(field string, block *yaml.Node) *KeySpec {
		if block == nil || block.Kind != yaml.MappingNode {
			return nil
		}
		fp := join(path, field)
		ks := d.keySpec(block, fp)
		if ks == nil {
			return nil
		}
		at := valueOf(block, "per")
		if per != "" && ks.Per != per {
			d.fail(at, join(fp, "per"), "%s differs from %s.per: %s: the keyed parts of one policy share each call's one key", ks.Per, perPath, per)
			return nil
		}
		per, perPath = ks.Per, fp
		return ks
	}
	if p.Breaker != nil {
		bn := valueOf(n, "breaker")
		p.Breaker.Keys = visit("breaker", bn)
		if field, msg := keyedWindowProblem(p.Breaker); msg != "" {
			at := valueOf(bn, field)
			if at == nil {
				at = bn
			}
			d.fail(at, join(path, "breaker."+field), "%s", msg)
		}
	}
	if p.Budget != nil {
		p.Budget.Keys = visit("budget", valueOf(n, "budget"))
	}
	if nb := p.Nested.Budget; nb != nil {
		if nn := valueOf(n, "nested"); nn != nil && nn.Kind == yaml.MappingNode {
			nb.Keys = visit("nested.budget", valueOf(nn, "budget"))
		}
	}
	if p.Limiter != nil {
		p.Limiter.Keys = visit("limiter", valueOf(n, "limiter"))
	}
	if h := p.Hedge; h != nil {
		hn := valueOf(n, "hedge")
		h.Keys = visit("hedge", hn)
		if h.Keys != nil && h.Adaptive == nil {
			d.fail(valueOf(hn, "per"), join(path, "hedge.per"), "a fixed delay is the same for every key: per needs adaptive (one delay from each key's latencies)")
			h.Keys = nil
		}
	}
}

// KeyPer returns what the policy's keyed parts are keyed by, PerHost or
// PerMethod, or "" when none is split per key (a nil s included).
func (s *PolicySpec) KeyPer() string {
	if s == nil {
		return ""
	}
	for _, k := range []*KeySpec{s.breakerKeys(), s.budgetKeys(), s.nestedKeys(), s.limiterKeys(), s.hedgeKeys()} {
		if k != nil {
			return k.Per
		}
	}
	return ""
}

func (s *PolicySpec) breakerKeys() *KeySpec {
	if s.Breaker == nil {
		return nil
	}
	return s.Breaker.Keys
}

func (s *PolicySpec) budgetKeys() *KeySpec {
	if s.Budget == nil {
		return nil
	}
	return s.Budget.Keys
}

func (s *PolicySpec) nestedKeys() *KeySpec {
	if s.Nested.Budget == nil {
		return nil
	}
	return s.Nested.Budget.Keys
}

func (s *PolicySpec) limiterKeys() *KeySpec {
	if s.Limiter == nil {
		return nil
	}
	return s.Limiter.Keys
}

func (s *PolicySpec) hedgeKeys() *KeySpec {
	if s.Hedge == nil {
		return nil
	}
	return s.Hedge.Keys
}

// KeyPer returns what the keyed parts of the policy in force are keyed
// by: PerHost, PerMethod, or "" when none is split per key. It reads the
// current spec, so it follows reloads (grpcretry.WithKeyPer(h.KeyPer)).
func (h *Handle) KeyPer() string { return h.Spec().KeyPer() }

// HTTPKey returns the key of req under the policy in force: HTTPMethodKey
// for per: method, else httpretry.HostKey (the scheme, host and port).
// Give it to the HTTP adapters so that the key follows the file:
// httpretry.WithKey(h.HTTPKey), hedge.Transport{Key: h.HTTPKey}. Without
// it they key by host, whatever the file's per says.
func (h *Handle) HTTPKey(req *http.Request) string {
	if h.KeyPer() == PerMethod {
		return HTTPMethodKey(req)
	}
	return httpretry.HostKey(req)
}

// HTTPMethodKey is the key of per: method for HTTP: the request's method
// ("GET" when empty), a space, and its URL's httpretry.HostKey and path,
// without the query: "POST https://api.example.com:443/v1/charges". A
// path that carries identifiers (/users/7) makes a key per identifier,
// bounded by max_keys; give WithKey a function of the route instead.
func HTTPMethodKey(req *http.Request) string {
	m := req.Method
	if m == "" {
		m = http.MethodGet
	}
	host := httpretry.HostKey(req)
	if req.URL == nil || host == "" && req.URL.Path == "" {
		return m
	}
	var b strings.Builder
	b.Grow(len(m) + 1 + len(host) + len(req.URL.Path))
	b.WriteString(m)
	b.WriteByte(' ')
	b.WriteString(host)
	b.WriteString(req.URL.Path)
	return b.String()
}

// keepPart is keep for a part that ks may split per key. Unkeyed (ks nil),
// it is keep. Keyed, the part is a group of members built by one, kept
// whole while both its member settings (key) and ks are unchanged; when
// only max_keys or idle changed (the key space, keySpace, is the same),
// newGroup may take over the old group's members, so surviving keys keep
// their state. After a change of per it takes none over. newGroup makes the group
// from a keyed.Config, the group in force with the same member settings
// (the zero T when none) and a member build function, and returns the
// group's close function (nil: nothing to stop), recorded as keep records
// one.
func keepPart[T any](b *buildPlan, r *Registry, cur map[string]keyed[T], name, key string, ks *KeySpec,
	one func() (T, func(), error), newGroup groupMaker[T]) (keyed[T], error) {
	if ks == nil {
		return keep(b, cur, name, key, one)
	}
	full, space := key+"\x00"+ks.String(), keySpace(key, ks)
	if old, ok := cur[name]; ok && old.key == full {
		return old, nil
	}
	var old T
	if o, ok := cur[name]; ok && o.space == space {
		old = o.v
	}
	g, closeFn, err := newGroup(r.keyConfig(ks), old, func() T {
		v, _, _ := one() // local members: no error, and the group stops them
		return v
	})
	if err != nil {
		return keyed[T]{}, err
	}
	if closeFn != nil {
		b.fresh = append(b.fresh, closeFn)
	}
	return keyed[T]{key: full, space: space, v: g, close: closeFn}, nil
}

// keySpace identifies what the members of a keyed part are and which
// keys they are kept under: their settings (member) and ks.Per. A new
// group takes over an old group's members only when their key spaces are
// equal: after a change of per (host to method), the old members' keys
// are keys no call carries any more.
func keySpace(member string, ks *KeySpec) string {
	return member + "\x00per=" + ks.Per
}

// groupMaker makes the group of a keyed part (see keepPart).
type groupMaker[T any] func(kc kg.Config, old T, build func() T) (group T, close func(), err error)

// adopt returns a build function for a new group that hands out old's
// members first (its default and overflow members for the two builds of
// "" keyed.New makes, then each live key's own), and builds the rest, and
// the keys of old's live members, for takeOver. take, when not nil, is asked before a
// member of old is handed out: false builds a new member instead. A nil
// old adopts nothing.
func adopt[M any](old *kg.Group[M], build func(key string) M, take func(M) bool) (func(key string) M, []string) {
	if old == nil {
		return build, nil
	}
	members := map[string]M{}
	old.Each(func(k string, m M) { members[k] = m })
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	firsts := []M{old.Default(), old.Overflow()}
	var mu sync.Mutex
	return func(key string) M {
		mu.Lock()
		defer mu.Unlock()
		if key == "" && len(firsts) > 0 {
			m := firsts[0]
			firsts = firsts[1:]
			if take == nil || take(m) {
				return m
			}
		} else if m, ok := members[key]; ok {
			delete(members, key)
			if take == nil || take(m) {
				return m
			}
		}
		return build(key)
	}, keys
}

// breakerGroup builds a local keyed breaker group, taking old's members
// over when old is one: at once, every live key's (so that no member of
// old is left waiting for its key's next call, and none is closed while
// the new group may still hand it out; takeOver). A member is closed when the last
// group holding it lets it go (breakerHolds): a member the group removes,
// and every member at the group's close, which the Registry calls after
// the swap of a reload that drops the group (or when the reload is not
// applied); a member a newer group took over stays open.
func breakerGroup(kc kg.Config, old retry.Breaker, build func() retry.Breaker) (retry.Breaker, func(), error) {
	var prev *kg.Group[*breaker.Breaker]
	if o, ok := old.(*kg.Breakers); ok {
		prev = o.Group
	}
	fresh := func(string) *breaker.Breaker {
		b := build().(*breaker.Breaker)
		breakerHolds.add(b)
		return b
	}
	from, keys := adopt(prev, fresh, breakerHolds.take)
	g, err := kg.NewWithRelease(kc, from, keepRefusing, func(_ string, b *breaker.Breaker) { breakerHolds.drop(b) })
	if err != nil {
		return nil, nil, err
	}
	takeOver(g, keys)
	return &kg.Breakers{Group: g}, g.Close, nil
}

// takeOver makes g take the old group's members of keys (adopt's) over
// now, rather than at each key's next call: a key not called before the
// next reload keeps its member too, and the old group's members are not
// held for keys never called again. Each counts as used at the reload.
func takeOver[M any](g *kg.Group[M], keys []string) {
	for _, k := range keys {
		g.Get(k)
	}
}

// keepRefusing keeps a breaker while it refuses calls, as
// keyed.NewBreakers's groups do (keyed.KeepBreaker).
func keepRefusing(b *breaker.Breaker, idle bool) bool { return kg.KeepBreaker(b, idle) }

// budgetGroup builds a keyed budget group, adopting old's members.
func budgetGroup(kc kg.Config, old retry.Budget, build func() retry.Budget) (retry.Budget, func(), error) {
	var prev *kg.Group[retry.Budget]
	if o, ok := old.(*kg.Budgets); ok {
		prev = o.Group
	}
	from, keys := adopt(prev, func(string) retry.Budget { return build() }, nil)
	g, err := kg.New(kc, from, nil)
	if err != nil {
		return nil, nil, err
	}
	takeOver(g, keys)
	return &kg.Budgets{Group: g}, nil, nil
}

// limiterGroup builds a keyed limiter group, adopting old's members.
func limiterGroup(kc kg.Config, old retry.Limiter, build func() retry.Limiter) (retry.Limiter, func(), error) {
	var prev *kg.Group[retry.Limiter]
	if o, ok := old.(*kg.Limiters); ok {
		prev = o.Group
	}
	from, keys := adopt(prev, func(string) retry.Limiter { return build() }, nil)
	g, err := kg.New(kc, from, nil)
	if err != nil {
		return nil, nil, err
	}
	takeOver(g, keys)
	return &kg.Limiters{Group: g}, nil, nil
}

// planAdaptives sets st's per-key Adaptive delays for the hedge block s
// (s.Keys and s.Adaptive set): the handle's group, kept whole while its
// settings are unchanged, or a new one that takes over the members of a
// group with the same delay settings and per (keySpace).
func (r *Registry) planAdaptives(st *handleState, s *HedgeSpec) {
	h := st.h
	member := adaptiveKey(s.Adaptive)
	key, space := member+"\x00"+s.Keys.String(), keySpace(member, s.Keys)
	if h.adaptives != nil && h.adaptivesKey == key {
		st.adaptives, st.adaptivesKey, st.adaptivesSpace = h.adaptives, key, space
		return
	}
	var prev *kg.Group[*hedge.Adaptive]
	if h.adaptives != nil && h.adaptivesSpace == space {
		prev = h.adaptives
	}
	c := *s.Adaptive
	c.Clock = r.opts.Clock
	from, keys := adopt(prev, func(string) *hedge.Adaptive { return hedge.NewAdaptive(c) }, nil)
	g, err := kg.New(r.keyConfig(s.Keys), from, nil)
	if err != nil { // refused by Parse already
		panic("config: " + err.Error())
	}
	takeOver(g, keys)
	st.adaptives, st.adaptivesKey, st.adaptivesSpace = g, key, space
}
