package clocktest

import (
	"sync"
	"testing"
	"time"
)

func TestAdvanceFiresInOrder(t *testing.T) {
	f := NewFake()
	var got []int
	var mu sync.Mutex
	rec := func(i int) func() { return func() { mu.Lock(); got = append(got, i); mu.Unlock() } }
	f.AfterFunc(3*time.Second, rec(3))
	f.AfterFunc(time.Second, rec(1))
	f.AfterFunc(time.Second, rec(2)) // same deadline: creation order
	tm := f.NewTimer(2 * time.Second)
	f.Advance(1500 * time.Millisecond)
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("got %v", got)
	}
	select {
	case <-tm.C():
		t.Fatal("timer fired early")
	default:
	}
	f.Advance(500 * time.Millisecond)
	if v := <-tm.C(); !v.Equal(Epoch.Add(2 * time.Second)) {
		t.Fatalf("timer sent %v", v)
	}
	f.Advance(time.Hour)
	if len(got) != 3 || !f.Now().Equal(Epoch.Add(time.Hour+2*time.Second)) {
		t.Fatalf("got %v now %v", got, f.Now())
	}
}

func TestCallbackTimersFireWithinAdvance(t *testing.T) {
	f := NewFake()
	fired := 0
	var again func()
	again = func() {
		fired++
		if fired < 5 {
			f.AfterFunc(time.Second, again)
		}
	}
	f.AfterFunc(time.Second, again)
	f.Advance(10 * time.Second)
	if fired != 5 {
		t.Fatalf("fired %d times, want 5", fired)
	}
}

func TestStopResetAndDeadlines(t *testing.T) {
	f := NewFake()
	a := f.NewTimer(time.Second)
	b := f.NewTimer(2 * time.Second)
	if d := f.Deadlines(); len(d) != 2 || d[0] != time.Second || d[1] != 2*time.Second {
		t.Fatalf("deadlines %v", d)
	}
	if !a.Stop() || a.Stop() {
		t.Fatal("Stop should report true once")
	}
	if !b.Reset(5 * time.Second) {
		t.Fatal("Reset of an active timer reports true")
	}
	f.Advance(4 * time.Second)
	select {
	case <-b.C():
		t.Fatal("reset timer fired early")
	default:
	}
	f.Advance(time.Second)
	<-b.C()
	if f.Pending() != 0 {
		t.Fatal("pending timers left")
	}
}

func TestBlockUntil(t *testing.T) {
	f := NewFake()
	done := make(chan struct{})
	go func() {
		<-f.NewTimer(time.Minute).C()
		close(done)
	}()
	f.BlockUntil(1)
	f.Advance(time.Minute)
	<-done
}

func TestZeroDurationFiresAtOnce(t *testing.T) {
	f := NewFake()
	<-f.NewTimer(0).C()
	ran := false
	f.AfterFunc(-time.Second, func() { ran = true })
	if !ran {
		t.Fatal("non-positive AfterFunc did not run")
	}
}
