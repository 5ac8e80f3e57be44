package labels

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

func TestTableBoundsLabels(t *testing.T) {
	made := map[string]int{}
	var mu sync.Mutex
	tab := New(3, func(label string) string {
		mu.Lock()
		made[label]++
		mu.Unlock()
		return label
	}, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				tab.Get(fmt.Sprint("op", (g+i)%5))
			}
		})
	}
	wg.Wait()
	got := tab.Values()
	slices.Sort(got)
	if len(got) != 4 || !slices.Contains(got, Overflow) {
		t.Fatalf("Values() = %v, want 3 names and %s", got, Overflow)
	}
	for label, n := range made {
		if n != 1 {
			t.Errorf("value of %q made %d times", label, n)
		}
	}
	if tab.Get("") != Unnamed && tab.Get("") != Overflow {
		t.Errorf("Get(\"\") = %q", tab.Get(""))
	}
}

func TestTableOverflowHook(t *testing.T) {
	tab := New(1, func(label string) string { return label },
		func(name, shared string) string { return shared + "/" + name })
	if v := tab.Get("a"); v != "a" {
		t.Fatalf("Get(a) = %q: the first name has a label of its own", v)
	}
	if v := tab.Get("b\xff"); v != Overflow+"/b\uFFFD" {
		t.Fatalf("Get(invalid UTF-8) = %q", v)
	}
}

func TestValue(t *testing.T) {
	for in, want := range map[string]string{"": Unnamed, "get-user": "get-user", "a\xffb": "a\uFFFDb"} {
		if got := Value(in); got != want {
			t.Errorf("Value(%q) = %q, want %q", in, got, want)
		}
	}
}
