package live

import (
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	var g gate
	g.idle.L = &g.mu
	for range 2 {
		if !g.enter() {
			t.Fatal("an open gate refused a request")
		}
	}
	done := make(chan struct{})
	go func() {
		g.closeAndWait()
		close(done)
	}()
	g.leave()
	g.leave()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("closeAndWait did not return once the gate was empty")
	}
	if g.enter() {
		t.Error("a closed gate admitted a request")
	}
}
