package queue

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestRingModel checks the ring against a slice under random pushes and
// pops at both ends, through many wrap-arounds.
func TestRingModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		capacity := rapid.IntRange(1, 8).Draw(rt, "capacity")
		r := newRing[*int](capacity, true)
		var model []int // values, oldest first; sizes are value*10
		next := 0
		contents := func() []int {
			var out []int
			for i := range r.n {
				j := r.index(i)
				if r.size[j] != *r.buf[j]*10 {
					rt.Fatalf("size %d for value %d", r.size[j], *r.buf[j])
				}
				out = append(out, *r.buf[j])
			}
			return out
		}
		rt.Repeat(map[string]func(*rapid.T){
			"pushBack": func(rt *rapid.T) {
				if r.full() {
					rt.Skip("full")
				}
				v := next
				next++
				r.pushBack(&v, v*10)
				model = append(model, v)
			},
			"pushFront": func(rt *rapid.T) {
				if r.full() {
					rt.Skip("full")
				}
				v := next
				next++
				r.pushFront(&v, v*10)
				model = slices.Insert(model, 0, v)
			},
			"popFront": func(rt *rapid.T) {
				if r.n == 0 {
					rt.Skip("empty")
				}
				if s := r.peekSize(); s != model[0]*10 {
					rt.Fatalf("peekSize %d, want %d", s, model[0]*10)
				}
				v, s := r.popFront()
				if *v != model[0] || s != model[0]*10 {
					rt.Fatalf("popFront %d/%d, want %d", *v, s, model[0])
				}
				model = model[1:]
			},
			"popBack": func(rt *rapid.T) {
				if r.n == 0 {
					rt.Skip("empty")
				}
				last := model[len(model)-1]
				if s := r.popBack(); s != last*10 {
					rt.Fatalf("popBack size %d, want %d", s, last*10)
				}
				model = model[:len(model)-1]
			},
			"": func(rt *rapid.T) {
				if got := contents(); !slices.Equal(got, model) {
					rt.Fatalf("ring %v, model %v", got, model)
				}
				for i := r.n; i < capacity; i++ { // freed slots hold no pointer
					if r.buf[r.index(i)] != nil {
						rt.Fatalf("slot %d not cleared", r.index(i))
					}
				}
			},
		})
	})
}

func TestRingUnsized(t *testing.T) {
	r := newRing[string](2, false)
	r.pushBack("a", 5)
	r.pushFront("b", 5)
	if r.peekSize() != 0 || r.popBack() != 0 {
		t.Fatal("unsized ring reports sizes")
	}
	if v, s := r.popFront(); v != "b" || s != 0 {
		t.Fatalf("popFront = %q, %d", v, s)
	}
}

func TestTaskFIFO(t *testing.T) {
	var f taskFIFO
	var want []*task
	for i := range 200 {
		tk := &task{seq: uint64(i)}
		f.push(tk)
		want = append(want, tk)
		if i%3 == 0 { // interleave pops so the head moves and compacts
			if got := f.pop(); got != want[0] {
				t.Fatalf("pop %d, want %d", got.seq, want[0].seq)
			}
			want = want[1:]
		}
	}
	if got := f.drain(); !slices.Equal(got, want) || f.len() != 0 {
		t.Fatalf("drain returned %d tasks, want %d", len(got), len(want))
	}
	f.push(&task{})
	if f.len() != 1 {
		t.Fatal("push after drain")
	}
}
