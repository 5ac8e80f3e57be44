// Command benchtable turns `go test -bench` output of the bench module
// (benchmarks named Benchmark<Workload>/lib=<library>) into the Markdown
// tables of BENCHMARKS.md: the median ns/op, B/op and allocs/op of each
// library per workload, and how many times faster stormguard is.
//
//	go run ./benchtable results.txt
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

type sample struct{ ns, bytes, allocs float64 }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: benchtable results.txt")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	if err := run(f, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(r io.Reader, w io.Writer) error {
	samples := map[string]map[string][]sample{} // workload -> lib -> samples
	var order []string
	libOrder := map[string][]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		workload, lib, s, ok := parse(sc.Text())
		if !ok {
			continue
		}
		if samples[workload] == nil {
			samples[workload] = map[string][]sample{}
			order = append(order, workload)
		}
		if samples[workload][lib] == nil {
			libOrder[workload] = append(libOrder[workload], lib)
		}
		samples[workload][lib] = append(samples[workload][lib], s)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(order) == 0 {
		return fmt.Errorf("benchtable: no Benchmark<Workload>/lib=<library> lines")
	}
	for _, wl := range order {
		fmt.Fprintf(w, "### %s\n\n| library | ns/op | B/op | allocs/op | stormguard is |\n|---|---:|---:|---:|---:|\n", wl)
		base, hasBase := median(samples[wl]["stormguard"])
		for _, lib := range libOrder[wl] {
			m, _ := median(samples[wl][lib])
			ratio := "—"
			switch {
			case lib == "bare":
				ratio = "reference (no retries)"
			case hasBase && lib != "stormguard" && base.ns > 0:
				ratio = fmt.Sprintf("%.2f× faster", m.ns/base.ns)
				if m.ns < base.ns {
					ratio = fmt.Sprintf("%.2f× slower", base.ns/m.ns)
				}
			}
			fmt.Fprintf(w, "| %s | %s | %.0f | %.0f | %s |\n", lib, fmtNS(m.ns), m.bytes, m.allocs, ratio)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// parse reads one result line such as
// "BenchmarkRetry/FirstTrySuccess/lib=stormguard-2  1000  6.1 ns/op  0 B/op  0 allocs/op".
func parse(line string) (workload, lib string, s sample, ok bool) {
	fields := strings.Fields(line)
	if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
		return "", "", s, false
	}
	name := fields[0]
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i] // the GOMAXPROCS suffix
		}
	}
	i := strings.Index(name, "/lib=")
	if i < 0 {
		return "", "", s, false
	}
	workload, lib = strings.TrimPrefix(name[:i], "Benchmark"), name[i+len("/lib="):]
	for j := 2; j+1 < len(fields); j += 2 {
		v, err := strconv.ParseFloat(fields[j], 64)
		if err != nil {
			return "", "", s, false
		}
		switch fields[j+1] {
		case "ns/op":
			s.ns, ok = v, true
		case "B/op":
			s.bytes = v
		case "allocs/op":
			s.allocs = v
		}
	}
	return workload, lib, s, ok
}

func median(xs []sample) (sample, bool) {
	if len(xs) == 0 {
		return sample{}, false
	}
	pick := func(get func(sample) float64) float64 {
		v := make([]float64, len(xs))
		for i, x := range xs {
			v[i] = get(x)
		}
		sort.Float64s(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return sample{
		ns:     pick(func(s sample) float64 { return s.ns }),
		bytes:  pick(func(s sample) float64 { return s.bytes }),
		allocs: pick(func(s sample) float64 { return s.allocs }),
	}, true
}

func fmtNS(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	}
	return fmt.Sprintf("%.1f ns", ns)
}
