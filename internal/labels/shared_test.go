package labels

import "testing"

// TestPartLabel: one operation keeps its label; several share one
// sorted label naming the first three and counting the rest.
func TestPartLabel(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"a", "a"}, "a"},
		{[]string{"b", "a", "b"}, "_shared:a,b"},
		{[]string{"e", "d", "c", "b", "a"}, "_shared:a,b,c,+2"},
	} {
		if got := PartLabel(c.in); got != c.want {
			t.Errorf("PartLabel(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if PartKey([]int{1}) != nil || PartKey(nil) != nil {
		t.Error("a value that == cannot compare, or nil, must never be shared")
	}
	p := new(int)
	if PartKey(p) != any(p) {
		t.Error("a pointer is its own identity")
	}
}
