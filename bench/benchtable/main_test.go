package main

import (
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	in := `goos: linux
BenchmarkRetry/FirstTrySuccess/lib=stormguard-2   100  6.0 ns/op  0 B/op  0 allocs/op
BenchmarkRetry/FirstTrySuccess/lib=stormguard-2   100  8.0 ns/op  0 B/op  0 allocs/op
BenchmarkRetry/FirstTrySuccess/lib=stormguard-2   100  7.0 ns/op  0 B/op  0 allocs/op
BenchmarkRetry/FirstTrySuccess/lib=failsafe-go-2  100  700 ns/op  432 B/op  15 allocs/op
BenchmarkHTTP/lib=bare-2  100  26000 ns/op  5000 B/op  61 allocs/op
PASS
`
	var out strings.Builder
	if err := run(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### Retry/FirstTrySuccess",
		"| stormguard | 7.0 ns | 0 | 0 | — |",
		"| failsafe-go | 700.0 ns | 432 | 15 | 100.00× faster |",
		"### HTTP",
		"| bare | 26.00 µs | 5000 | 61 | reference (no retries) |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := run(strings.NewReader("nothing"), &out); err == nil {
		t.Error("no benchmark lines must be an error")
	}
}

func FuzzParse(f *testing.F) {
	f.Add("BenchmarkRetry/X/lib=a-2 1 6.0 ns/op 0 B/op 0 allocs/op")
	f.Add("Benchmark/lib=-x 1 NaN ns/op")
	f.Fuzz(func(t *testing.T, line string) {
		parse(line) // must not panic
	})
}
