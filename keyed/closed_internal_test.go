package keyed

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/stormguard/stormguard/clock/clocktest"
)

// TestClosedGroupLookupTakesNoLock (review): after Close, Get and For of
// a key the group has no member for return the default member without
// the group's mutex. The test holds the mutex and looks a new key up:
// the lookup must finish, not wait on the lock. (Before: a closed
// group's lookup of a new key went to the slow path and took the lock.)
func TestClosedGroupLookupTakesNoLock(t *testing.T) {
	g, err := New(Config{Clock: clocktest.NewFake()}, func(k string) *int { return new(int) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Get("a")
	g.Close()
	g.mu.Lock()
	done := make(chan *int, 2)
	go func() {
		done <- g.Get("a") // a key that had a member
		done <- g.For(WithKey(t.Context(), "new"))
	}()
	var got []*int
	for len(got) < 2 {
		select {
		case m := <-done:
			got = append(got, m)
			continue
		default:
		}
		if blockedOnGroupLock() {
			g.mu.Unlock()
			t.Fatal("a closed group's lookup of a key waits on the group's mutex")
		}
		runtime.Gosched()
	}
	g.mu.Unlock()
	for _, m := range got {
		if m != g.Default() {
			t.Fatal("a closed group's lookup did not give the default member")
		}
	}
}

// blockedOnGroupLock reports whether a goroutine is in the slow path of
// a group waiting for its mutex.
func blockedOnGroupLock() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, gr := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(gr, []byte("sync.(*Mutex).Lock")) && bytes.Contains(gr, []byte("keyed.(*Group[")) {
			return true
		}
	}
	return false
}
