package sim

import (
	"strings"
	"testing"
)

func TestTableWriteToAligns(t *testing.T) {
	tb := Table{
		Title:  "T",
		Header: []string{"policy", "peak×", "n"},
		Rows:   [][]string{{"a", "1.0x", "12345"}, {"longer", "10.5x"}},
		Notes:  []string{"a note"},
	}
	var b strings.Builder
	n, err := tb.WriteTo(&b)
	want := "T\n" +
		"policy  peak×      n\n" +
		"--------------------\n" +
		"a        1.0x  12345\n" +
		"longer  10.5x\n" +
		"* a note\n"
	if err != nil || b.String() != want || n != int64(len(want)) {
		t.Fatalf("WriteTo wrote %d, %v:\n%s\nwant:\n%s", n, err, b.String(), want)
	}
}

func TestMetricsTableAndColumns(t *testing.T) {
	var cols []Column
	for _, k := range []string{"amp", "success", "recovery", "p99"} {
		c, ok := LookupColumn(k)
		if !ok {
			t.Fatalf("no column %q", k)
		}
		cols = append(cols, c)
	}
	if _, ok := LookupColumn("vibes"); ok {
		t.Fatal("found a column that does not exist")
	}
	stuck := Metrics{Amplification: 4.44, SuccessRate: 0.5, Recovered: 0, P99ms: 1500}
	some := Metrics{Amplification: 1, SuccessRate: 1, Recovered: 0.5, RecoveryS: 2, P99ms: 12}
	tb := MetricsTable("title", cols, []Row{{Policy: "a", Metrics: &stuck}, {Policy: "b", Metrics: &some}, {Policy: "c"}})
	want := [][]string{{"a", "4.4x", "50.0%", "stuck", "1.50s"}, {"b", "1.0x", "100.0%", "2.0s (50%)", "12ms"}, {"c", "-", "-", "-", "-"}}
	if strings.Join(tb.Header, ",") != "policy,peak×,success,recovery,p99" || len(tb.Rows) != 3 {
		t.Fatalf("table %+v", tb)
	}
	for i, r := range want {
		if strings.Join(tb.Rows[i], "|") != strings.Join(r, "|") {
			t.Errorf("row %d: %q, want %q", i, tb.Rows[i], r)
		}
	}
	if len(ColumnKeys()) != len(columns) {
		t.Errorf("keys %v", ColumnKeys())
	}
}

func TestFormatMS(t *testing.T) {
	for ms, want := range map[float64]string{4.54: "4.5ms", 45.4: "45ms", 4540: "4.54s", 45400: "45s"} {
		if got := FormatMS(ms); got != want {
			t.Errorf("FormatMS(%v) = %q, want %q", ms, got, want)
		}
	}
	if got := FormatShare(0.1234); got != "12.3%" {
		t.Errorf("FormatShare = %q", got)
	}
}
