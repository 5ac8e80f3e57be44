package listeners

import (
	"fmt"
	"sync"
	"testing"
)

func TestOrderAndReentrancy(t *testing.T) {
	var q Queue[int]
	var got []string
	q.Subscribe(func(e int) {
		got = append(got, fmt.Sprint("a", e))
		if e == 1 { // an event caused by a subscriber is delivered after the current one
			q.Push(3)
			q.Deliver()
		}
	})
	unsub := q.Subscribe(func(e int) { got = append(got, fmt.Sprint("b", e)) })
	q.Push(1)
	q.Push(2)
	q.Deliver()
	if fmt.Sprint(got) != "[a1 b1 a2 b2 a3 b3]" {
		t.Fatalf("delivered %v", got)
	}
	unsub()
	unsub()
	got = nil
	q.Push(4)
	q.Deliver()
	if fmt.Sprint(got) != "[a4]" {
		t.Fatalf("after unsubscribe: %v", got)
	}
}

func TestPanickingSubscriberDoesNotWedge(t *testing.T) {
	var q Queue[int]
	var seen []int
	q.Subscribe(func(e int) {
		if e == 1 {
			panic("boom")
		}
		seen = append(seen, e)
	})
	q.Push(1)
	func() {
		defer func() { recover() }()
		q.Deliver()
	}()
	q.Push(2)
	q.Deliver()
	if fmt.Sprint(seen) != "[2]" {
		t.Fatalf("seen %v", seen)
	}
}

func TestConcurrentPushersDeliverEverythingOnce(t *testing.T) {
	var q Queue[int]
	var mu sync.Mutex
	count := map[int]int{}
	q.Subscribe(func(e int) { mu.Lock(); count[e]++; mu.Unlock() })
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				q.Push(g*100 + i)
				q.Deliver()
			}
		}()
	}
	wg.Wait()
	q.Deliver()
	if len(count) != 800 {
		t.Fatalf("%d distinct events delivered, want 800", len(count))
	}
	for e, n := range count {
		if n != 1 {
			t.Fatalf("event %d delivered %d times", e, n)
		}
	}
}

// A subscriber that panics stops neither the other subscribers of that
// event nor the events queued after it; Deliver panics with its value
// once everything was delivered, and the queue keeps working.
func TestPanickingSubscriberStopsNoDelivery(t *testing.T) {
	var q Queue[int]
	var seen []string
	q.Subscribe(func(e int) {
		if e == 1 {
			panic("boom")
		}
		seen = append(seen, fmt.Sprint("a", e))
	})
	q.Subscribe(func(e int) { seen = append(seen, fmt.Sprint("b", e)) })
	q.Push(1)
	q.Push(2)
	var v any
	func() {
		defer func() { v = recover() }()
		q.Deliver()
	}()
	if v != "boom" {
		t.Fatalf("Deliver panicked with %v, want the subscriber's value", v)
	}
	if fmt.Sprint(seen) != "[b1 a2 b2]" {
		t.Fatalf("delivered %v, want [b1 a2 b2]", seen)
	}
	seen = nil
	q.Push(3)
	q.Deliver()
	if fmt.Sprint(seen) != "[a3 b3]" {
		t.Fatalf("after the panic: %v", seen)
	}
}
