package main

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/faultinject"
)

// An empty PUT /rules (what curl --data-binary @missing-file sends after a
// warning) is refused with 400 and the rules stay (#26 item 8).
func TestPutEmptyRulesIsRefused(t *testing.T) {
	up := newUpstream(t)
	p := startProxy(t, config{Upstream: mustURL(t, up.URL)}, nil)
	c := client(t)
	if r := putRules(t, c, p, "", "abort: {percent: 100, status: 429}"); r.status != 200 {
		t.Fatalf("PUT abort: %+v", r)
	}
	for _, tc := range []struct{ contentType, body string }{
		{"", ""},
		{"application/x-www-form-urlencoded", ""}, // curl's default
		{"application/yaml", "\n  \n# only a comment\n"},
		{"application/yaml", "---\n"},
		{"application/json", ""},
		{"application/json", " \r\n"},
	} {
		r := putRules(t, c, p, tc.contentType, tc.body)
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, "empty rules") {
			t.Errorf("PUT %q (%s): %+v, want 400 empty rules", tc.body, tc.contentType, r)
		}
	}
	if r := get(c, p.proxyURL+"/a"); r.status != 429 {
		t.Fatalf("after the refused PUTs: %+v, want the abort rule still in force", r)
	}
	// {} is the way to clear every fault.
	if r := putRules(t, c, p, "", "{}"); r.status != 200 {
		t.Fatalf("PUT {}: %+v", r)
	}
	if r := get(c, p.proxyURL+"/a"); r.status != 200 {
		t.Fatalf("after PUT {}: %+v", r)
	}
}

// hookClock is a fake clock that runs a hook, once, the next time Now is
// called: a test uses it to act in the middle of the admin's PUT.
type hookClock struct {
	*clocktest.Fake
	hook atomic.Pointer[func()]
}

func (c *hookClock) Now() time.Time {
	if h := c.hook.Swap(nil); h != nil {
		(*h)()
	}
	return c.Fake.Now()
}

// PUT /rules?restart=true changes the rules and the epoch in one step: a
// request that arrives while the PUT reads the clock sees the old rules or
// the new ones on the new schedule, never the new rules on the old
// schedule (#26 item 8).
func TestPutRulesRestartIsAtomic(t *testing.T) {
	up := newUpstream(t)
	clk := &hookClock{Fake: clocktest.NewFake()}
	p := startProxy(t, config{Upstream: mustURL(t, up.URL), clock: clk}, nil)
	c := client(t)
	clk.Advance(time.Hour) // the epoch is an hour old
	// On the new schedule the outage answers 502; on the old one it is
	// long over and the abort answers 429; the old rules pass (200).
	const rules = "abort: {percent: 100, status: 429}\noutages: [{start: 0s, end: 10s, status: 502}]\n"
	seen := make(chan result, 1)
	hook := func() { seen <- get(c, p.proxyURL+"/during") }
	clk.hook.Store(&hook)
	if r := send(context.Background(), c, http.MethodPut, p.adminURL+"/rules?restart=true", "", rules); r.status != 200 {
		t.Fatalf("PUT ?restart=true: %+v", r)
	}
	select {
	case r := <-seen:
		if r.status != 200 && r.status != 502 {
			t.Fatalf("a request during PUT ?restart=true got %d %s (%s): the new rules on the old schedule",
				r.status, r.header.Get(faultinject.HeaderFault), r.body)
		}
	default:
		t.Fatal("the PUT did not read the clock")
	}
	if r := get(c, p.proxyURL+"/after"); r.status != 502 || r.header.Get(faultinject.HeaderFault) != "outage" {
		t.Fatalf("after the PUT: %+v, want the outage", r)
	}
}
