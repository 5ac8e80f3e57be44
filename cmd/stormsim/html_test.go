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
	fullModel(t)
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
	for _, want := range []string{"Offered load on the collector", "token-bucket", "full+budget", "<table>", "Reading the tables"} {
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

// legendCheck is a script run in the browser after the report loads: for
// every term of the legend it checks that its definition starts on the
// term's own line, and writes the verdict into the page.
const legendCheck = `<script>
window.addEventListener('load', () => {
  const bad = [];
  const dts = document.querySelectorAll('dl.legend dt');
  dts.forEach((dt) => {
    const dd = dt.nextElementSibling;
    if (!dd || dd.tagName !== 'DD') { bad.push(dt.textContent + ': no definition'); return; }
    const a = dt.getBoundingClientRect(), b = dd.getBoundingClientRect();
    if (Math.abs(a.top - b.top) > 4 || b.left < a.right) bad.push(dt.textContent + ' is not beside its definition');
  });
  const out = document.createElement('pre');
  out.id = 'legend-check';
  out.textContent = (dts.length ? (bad.length ? 'BAD ' + bad.join('; ') : 'OK ' + dts.length) : 'BAD no legend');
  document.body.appendChild(out);
});
</script>`

// Each term of the HTML report's legend sits beside its own definition,
// at a narrow window where long terms ("p50 p99 p99.9") wrap, and at a
// wide one where a short definition is one line beside a wrapped term.
func TestHTMLLegendTermsSitBesideTheirDefinitions(t *testing.T) {
	fullModel(t)
	bin := chromium(t)
	sc, _ := sim.Lookup("retry-budget")
	rep, err := sc.Run(context.Background(), sim.Options{Seed: 1, Clients: 10, Duration: 10 * time.Second, Policies: []string{"immediate"}})
	if err != nil {
		t.Fatal(err)
	}
	legend := append(sim.ColumnLegend(), [2]string{"a rather long term that wraps", "short"}, [2]string{"next", "its own definition"})
	dir := t.TempDir()
	if err := writeOutDir(dir, reportSet{Reports: []*sim.Report{rep}, Data: []*sim.Report{rep}, Legend: legend}, 1, false); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "checked.html")
	if err := os.WriteFile(page, []byte(strings.Replace(string(html), "</body>", legendCheck+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, width := range []string{"420", "1200"} {
		dom := string(headless(t, bin, page, "--window-size="+width+",1000", "--dump-dom"))
		i := strings.Index(dom, `<pre id="legend-check">`)
		if i < 0 {
			t.Fatalf("width %s: the check did not run", width)
		}
		verdict := dom[i+len(`<pre id="legend-check">`):]
		verdict = verdict[:strings.Index(verdict, "</pre>")]
		if !strings.HasPrefix(verdict, "OK ") {
			t.Errorf("width %s: %s", width, verdict)
		}
	}
}
