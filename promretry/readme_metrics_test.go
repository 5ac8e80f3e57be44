package promretry_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stormguard/stormguard/promretry"
)

// readmeDescRE reads a Desc's name and variable labels from its String form.
var readmeDescRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// TestReadmeNamesEveryMetric: the README's metrics table has a row for
// every metric the Collector describes, and the row names each of its
// labels, so a new metric or label cannot ship undocumented.
func TestReadmeNamesEveryMetric(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for line := range strings.SplitSeq(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "| `stormguard_"); ok {
			name, _, _ = strings.Cut(name, "`")
			rows["stormguard_"+name] = line
		}
	}
	ch := make(chan *prometheus.Desc, 100)
	go func() {
		promretry.New(promretry.Config{}).Describe(ch)
		close(ch)
	}()
	n := 0
	for d := range ch {
		m := readmeDescRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		n++
		row, ok := rows[m[1]]
		if !ok {
			t.Errorf("README.md has no row for %s", m[1])
			continue
		}
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" && !strings.Contains(row, "`"+l+"`") {
				t.Errorf("README.md's row for %s does not name its label %s", m[1], l)
			}
		}
		delete(rows, m[1])
	}
	if n < 30 {
		t.Fatalf("only %d metrics described", n)
	}
	for name := range rows {
		t.Errorf("README.md has a row for %s, which the Collector does not export", name)
	}
}
