package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// chromium returns the path of a Chromium binary, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH for the browser check of the HTML report " +
		"(install Debian's chromium package; make test does)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg) // in CI a missing install step must not hide behind a skip
	}
	t.Skip(msg)
	return ""
}

// headless runs Chromium on a file URL with no network and no profile,
// with extra arguments, and returns its standard output.
func headless(t *testing.T, bin, page string, extra ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(),
	}, extra...)
	args = append(args, "file://"+page)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", extra, err, stderr.String())
	}
	return stdout.Bytes()
}

// The HTML report opens in a real browser with no network, and the charts
// are in the rendered page.
func TestHTMLReportRendersInChromium(t *testing.T) {
	bin := chromium(t)
	var reports []*sim.Report
	for _, o := range []struct {
		name     string
		clients  int
		policies []string
	}{
		{"retry-budget", 20, []string{"immediate", "token-bucket"}},
		{"gateway-restart", 300, []string{"immediate", "full+budget"}},
	} {
		sc, _ := sim.Lookup(o.name)
		rep, err := sc.Run(context.Background(), sim.Options{Seed: 1, Clients: o.clients, Duration: 30 * time.Second, Policies: o.policies})
		if err != nil {
			t.Fatal(err)
		}
		reports = append(reports, rep)
	}
	plots := len(reports[0].Plots) + len(reports[1].Plots)
	dir := t.TempDir()
	if err := writeOutDir(dir, reportSet{Reports: reports, Data: reports, Legend: sim.ColumnLegend()}, 1, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "charts", "gateway-restart-01.svg")); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")

	dom := string(headless(t, bin, page, "--dump-dom"))
	if n := strings.Count(dom, "<svg"); n != plots {
		t.Errorf("rendered page has %d svg charts, want %d", n, plots)
	}
	if n := strings.Count(dom, `data-chart="`); n != plots {
		t.Errorf("rendered page has %d chart figures, want %d", n, plots)
	}
	for _, want := range []string{"Offered load on the collector, all policies", "token-bucket", "full+budget", "<table>", "Reading the tables"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
	// The lines were drawn: an SVG path per series.
	if n := strings.Count(dom, "<path"); n < plots*3 {
		t.Errorf("only %d paths in %d charts", n, plots)
	}

	shot := filepath.Join(dir, "shot.png")
	headless(t, bin, page, "--window-size=1200,2000", "--screenshot="+shot)
	info, err := os.Stat(shot)
	if err != nil || info.Size() < 20_000 {
		t.Fatalf("screenshot %v, %v: want a picture of the page", info, err)
	}
}
