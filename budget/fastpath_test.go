package budget

import (
	"testing"
	"unsafe"

	"github.com/stormguard/stormguard/internal/fastpath"
	"github.com/stormguard/stormguard/internal/stripe"
	"github.com/stormguard/stormguard/retry"
)

// TestFastFirstOKIsRecord checks that the hooks retry's fused first
// attempt calls (internal/fastpath) leave a Ratio as Record(false, nil)
// does, in every cell: full, not full, and lent out.
func TestFastFirstOKIsRecord(t *testing.T) {
	var x retry.Budget = (*Ratio)(nil)
	if fastpath.Budget.Tab.Load() != fastpath.TypeWord(unsafe.Pointer(&x)) {
		t.Fatal("fastpath.Budget.Tab is not the type word of a *Ratio as a retry.Budget")
	}
	for _, initial := range []float64{10, 5, 0.05} {
		for _, lend := range []bool{false, true} {
			c := RatioConfig{MaxTokens: 10, InitialTokens: initial, Refill: 0.1}
			a, b := NewRatio(c), NewRatio(c)
			if lend {
				Lend(a)
				Lend(b)
			}
			for i := range 3 * stripe.N {
				h := i % stripe.N
				RecordAt(a, h, false, nil)
				p := unsafe.Pointer(b)
				if fastpath.Budget.FirstOK(p, h) {
					fastpath.Budget.Refill(p, h)
				}
			}
			Collect(a)
			Collect(b)
			if sa, sb := a.Stats(), b.Stats(); sa != sb {
				t.Errorf("initial %v lent %v: stats %+v by the hooks, %+v by Record", initial, lend, sb, sa)
			}
			if ta, tb := a.Available(), b.Available(); ta != tb {
				t.Errorf("initial %v lent %v: %v tokens by the hooks, %v by Record", initial, lend, tb, ta)
			}
			for i := range stripe.N {
				if ca, cb := a.cells.At(i).firstOK.Load(), b.cells.At(i).firstOK.Load(); ca != cb {
					t.Errorf("cell %d: %d deposits by the hooks, %d by Record", i, cb, ca)
				}
			}
		}
	}
	if fastpath.Budget.FirstOK(nil, 3) {
		t.Error("a nil Ratio asks for a refill")
	}
}

// TestAddFirstOKIsFirstOK checks fastpath.AddFirstOK, FirstOK written out
// from the offsets budget registers (Budget.FirstOKs, Tokens and Max),
// against FirstOK, the leaf: the same answer and the same counts in every
// cell, full, not full and lent out, and offsets that name the Ratio's
// own words.
func TestAddFirstOKIsFirstOK(t *testing.T) {
	var r Ratio
	base := uintptr(unsafe.Pointer(&r))
	for i := range stripe.N {
		if got, want := base+fastpath.Budget.FirstOKs.Off+uintptr(i)*fastpath.Budget.FirstOKs.Stride, uintptr(unsafe.Pointer(&r.cells.At(i).firstOK)); got != want {
			t.Fatalf("cell %d: the firstOK counter is at %#x, fastpath has %#x", i, want-base, got-base)
		}
	}
	if got, want := base+fastpath.Budget.Tokens, uintptr(unsafe.Pointer(&r.tokens)); got != want {
		t.Fatalf("tokens is at %#x, fastpath has %#x", want-base, got-base)
	}
	if got, want := base+fastpath.Budget.Max, uintptr(unsafe.Pointer(&r.p.max)); got != want {
		t.Fatalf("p.max is at %#x, fastpath has %#x", want-base, got-base)
	}
	for _, initial := range []float64{10, 5, 0.05} {
		for _, lend := range []bool{false, true} {
			c := RatioConfig{MaxTokens: 10, InitialTokens: initial, Refill: 0.1}
			a, b := NewRatio(c), NewRatio(c)
			if lend {
				Lend(a)
				Lend(b)
			}
			for i := range 3 * stripe.N {
				h := i % stripe.N
				pa, pb := unsafe.Pointer(a), unsafe.Pointer(b)
				ra, rb := fastpath.Budget.FirstOK(pa, h), fastpath.AddFirstOK(pb, h)
				if ra != rb {
					t.Fatalf("initial %v lent %v, step %d: AddFirstOK %v, FirstOK %v", initial, lend, i, rb, ra)
				}
				if ra {
					fastpath.Budget.Refill(pa, h)
					fastpath.Budget.Refill(pb, h)
				}
			}
			Collect(a)
			Collect(b)
			if sa, sb := a.Stats(), b.Stats(); sa != sb {
				t.Errorf("initial %v lent %v: stats %+v by AddFirstOK, %+v by FirstOK", initial, lend, sb, sa)
			}
			if ta, tb := a.Available(), b.Available(); ta != tb {
				t.Errorf("initial %v lent %v: %v tokens by AddFirstOK, %v by FirstOK", initial, lend, tb, ta)
			}
			for i := range stripe.N {
				if ca, cb := a.cells.At(i).firstOK.Load(), b.cells.At(i).firstOK.Load(); ca != cb {
					t.Errorf("cell %d: %d deposits by AddFirstOK, %d by FirstOK", i, cb, ca)
				}
			}
		}
	}
}
