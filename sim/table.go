package sim

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is a rendered summary: a title, a header and rows of cells. The
// first column names the policy; the rest are right-aligned numbers.
type Table struct {
	// Title is the line written above the table ("" writes an empty
	// line).
	Title string
	// Header holds the column headings, the first over the policy names;
	// its length sets the number of columns.
	Header []string
	// Rows hold the cells, a row each: cells beyond the header's columns
	// are dropped, missing ones left blank.
	Rows [][]string
	// Notes are lines of text written under the table, one each.
	Notes []string
}

// WriteTo writes t as aligned text, a line each: the title, the header, a
// rule as wide as the table, the rows, then the notes. The first column is
// left-aligned, the others right-aligned two spaces apart; widths count
// runes. It implements io.WriterTo.
func (t Table) WriteTo(w io.Writer) (int64, error) {
	widths := make([]int, len(t.Header))
	measure := func(row []string) {
		for i, cell := range row {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(cell))
			}
		}
	}
	measure(t.Header)
	for _, r := range t.Rows {
		measure(r)
	}
	var b bytes.Buffer
	line := func(row []string) {
		var l strings.Builder
		for i := range widths {
			cell := ""
			if i < len(row) {
				cell = row[i]
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if i == 0 {
				l.WriteString(cell + pad)
			} else {
				l.WriteString("  " + pad + cell)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
	b.WriteString(t.Title + "\n")
	line(t.Header)
	total := 0
	for _, wd := range widths {
		total += wd
	}
	b.WriteString(strings.Repeat("-", total+2*max(len(widths)-1, 0)) + "\n")
	for _, r := range t.Rows {
		line(r)
	}
	width := max(total+2*max(len(widths)-1, 0), 72)
	for _, n := range t.Notes {
		if strings.HasPrefix(n, "each cell") {
			b.WriteString(n + "\n") // the sweep tables' key, part of the table
			continue
		}
		b.WriteString(wrapNote(n, width))
	}
	return b.WriteTo(w)
}

// wrapNote writes a note as "* " and its words, wrapped at width runes,
// continuation lines indented by two spaces.
func wrapNote(n string, width int) string {
	var b strings.Builder
	col := 0
	for i, word := range strings.Fields(n) {
		wl := utf8.RuneCountInString(word)
		switch {
		case i == 0:
			b.WriteString("* " + word)
			col = 2 + wl
		case col+1+wl > width:
			b.WriteString("\n  " + word)
			col = 2 + wl
		default:
			b.WriteString(" " + word)
			col += 1 + wl
		}
	}
	b.WriteString("\n")
	return b.String()
}

// Column is one metric column of a table: its Key (as ModelSpec.Columns
// names it), its Header, and how a cell shows a row's Metrics.
type Column struct {
	// Key is the column's name in ModelSpec.Columns and ColumnKeys
	// ("amp", "success", …).
	Key string
	// Header is the column's heading in tables ("peak×", …).
	Header string
	// Cell formats a row's Metrics. It is never called with nil: a row
	// without Metrics, or not run, shows "-" or "not run" instead.
	Cell func(m *Metrics) string
}

var columns = []Column{
	{"amp", "peak×", ampCell},
	{"steady", "steady×", func(m *Metrics) string { return fmt.Sprintf("%.2fx", m.SteadyLoad) }},
	{"after", "peak× after", func(m *Metrics) string { return fmt.Sprintf("%.1fx", m.AmplificationAfter) }},
	{"attempts", "attempts", func(m *Metrics) string { return fmt.Sprintf("%.0f", m.Attempts) }},
	{"apc", "att/call", func(m *Metrics) string { return fmt.Sprintf("%.2f", m.AttemptsPerCall) }},
	{"fapc", "in fault", func(m *Metrics) string { return fmt.Sprintf("%.2f", m.FaultAttemptsPerCall) }},
	{"tiers", "by tier", tiersCell},
	{"local", "local", func(m *Metrics) string { return FormatShare(m.LocalRejected) }},
	{"goodput", "goodput", func(m *Metrics) string { return fmt.Sprintf("%.0f/s", m.Goodput) }},
	{"success", "success", func(m *Metrics) string {
		if m.SuccessCI > 0 {
			return FormatShare(m.SuccessRate) + " ±" + FormatShare(m.SuccessCI)
		}
		return FormatShare(m.SuccessRate)
	}},
	{"inrun", "in run", func(m *Metrics) string { return FormatShare(m.SuccessInRun) }},
	{"reports", "delivered/late/dropped", func(m *Metrics) string {
		return FormatShare(m.ReportsDelivered) + " / " + FormatShare(m.ReportsDelayed) + " / " + FormatShare(m.ReportsDropped)
	}},
	{"conc", "conc", func(m *Metrics) string { return fmt.Sprintf("%.0f", m.PeakConcurrency) }},
	{"queue", "queue", func(m *Metrics) string { return fmt.Sprintf("%.0f", m.PeakQueue) }},
	{"inflight", "conns", func(m *Metrics) string { return fmt.Sprintf("%.0f", m.PeakInFlight) }},
	{"recovery", "recovery", recoveryCell},
	{"p50", "p50", func(m *Metrics) string { return latencyCell(m.P50ms, m.P50Open) }},
	{"p99", "p99", func(m *Metrics) string { return latencyCell(m.P99ms, m.P99Open) }},
	{"p999", "p99.9", func(m *Metrics) string { return latencyCell(m.P999ms, m.P999Open) }},
	{"sync", "sync", syncCell},
	{"kurt", "kurt", kurtosisCell},
}

// ColumnLegend explains the table headers, in column order.
func ColumnLegend() [][2]string {
	return [][2]string{
		{"peak×", "amplification: peak offered load (1s window) ÷ the baseline load of the same workload with no fault and no retries (one baseline for every policy of a case)"},
		{"steady×", "steady load: the policy's own load before any fault ÷ that same baseline: what it adds in steady state (hedges, or retries of failures that happen without a fault)"},
		{"peak× after", "peak× over the windows after the fault has ended: the retries arriving once the server is back, apart from the fault itself"},
		{"attempts", "attempts sent to the measured tier (the work)"},
		{"att/call", "attempts per client call"},
		{"in fault", "attempts at the measured tier per client call started during the fault (through every tier in between): the load multiplier while the fault lasts"},
		{"by tier", "in fault at every tier of the chain, outermost first: attempts reaching each tier per client call started during the fault (the last is \"in fault\")"},
		{"local", "share of the requests towards the measured tier (attempts sent plus attempts refused) that a client-side limiter (SRE adaptive throttling, AWS adaptive mode) refused locally before they cost the tier anything"},
		{"goodput", "calls that succeeded while the clients were starting calls, per second of that time (the drain's successes are not spread over the run)"},
		{"success", "share of client calls that succeeded by the end of the run, the drain included"},
		{"in run", "share of client calls that succeeded before the clients stopped starting calls (the rest of success came in the drain)"},
		{"delivered/late/dropped", "with a report queue: shares of the reports the clients made that were delivered, delivered late (after a delivery that gave up put them back), and dropped by a full queue (the rest were still pending at the end)"},
		{"conc", "peak requests inside the measured tier (serving + queued)"},
		{"queue", "peak queue length of the measured tier"},
		{"conns", "peak attempts in flight towards the measured tier (open connections)"},
		{"recovery", "time from the end of the fault until success holds at 99% of baseline for 1s with the queue drained; stuck: not recovered, though the traffic went on for at least the scenario's recovery tolerance (10s unless it says otherwise) + 10s after the fault; unobserved: not recovered, but the traffic stopped sooner after the fault, too soon to tell a slow recovery from none"},
		{"p50 p99 p99.9", "client call latency percentiles, counting the calls still open at the end of the run with their age then; \"> x\": the percentile is such a call, so x is only a lower bound"},
		{"sync", "share of retries sent in synchronized spikes (10ms buckets with ≥4x the mean of the surrounding second and ≥5 retries), with the number of retries it is a share of; –: fewer than 100 retries, too few to judge"},
		{"kurt", "kurtosis of the offered load per 10ms, and in brackets the 3 + 1/λ of a Poisson stream of the same mean λ per 10ms (not 3: at low rates steady random load is well above 3); higher than the bracket is spikier"},
	}
}

// tiersCell shows FaultTierAttemptsPerCall as a/b/c.
func tiersCell(m *Metrics) string {
	t := m.FaultTierAttemptsPerCall
	if t.Len() == 0 {
		return "–"
	}
	var b strings.Builder
	for i := range t.Len() {
		if i > 0 {
			b.WriteByte('/')
		}
		fmt.Fprintf(&b, "%.2f", t.At(i))
	}
	return b.String()
}

// DefaultColumns are the table columns of a model scenario.
var DefaultColumns = []string{"amp", "attempts", "apc", "goodput", "success", "inrun", "conc", "queue", "recovery", "p50", "p99", "p999", "sync", "kurt"}

// ColumnKeys returns the metric column keys a table may show.
func ColumnKeys() []string {
	keys := make([]string, len(columns))
	for i, c := range columns {
		keys[i] = c.Key
	}
	return keys
}

// LookupColumn returns the column called key (one of ColumnKeys).
func LookupColumn(key string) (Column, bool) {
	for _, c := range columns {
		if c.Key == key {
			return c, true
		}
	}
	return Column{}, false
}

// MetricsTable returns a table with a row per policy: its name under the
// header "policy", then a cell per column. A row marked NotRun shows "not
// run" in its first column and "-" in the others; a row without Metrics
// shows "-" in every column.
func MetricsTable(title string, cols []Column, rows []Row) Table {
	t := Table{Title: title, Header: []string{"policy"}}
	for _, col := range cols {
		t.Header = append(t.Header, col.Header)
	}
	// The row with the lowest peak×, for the ≈ marks of rows whose
	// confidence interval overlaps its own.
	var low *Metrics
	for _, r := range rows {
		if !r.NotRun && r.Metrics != nil && r.Metrics.AmplificationCI > 0 && (low == nil || r.Metrics.Amplification < low.Amplification) {
			low = r.Metrics
		}
	}
	for _, r := range rows {
		row := []string{r.Policy}
		for i, col := range cols {
			cell := "-"
			if r.NotRun && i == 0 {
				cell = "not run"
			}
			if r.Metrics != nil && !r.NotRun {
				cell = col.Cell(r.Metrics)
				if col.Key == "amp" && low != nil && r.Metrics != low &&
					r.Metrics.Amplification-r.Metrics.AmplificationCI <= low.Amplification+low.AmplificationCI {
					cell = "≈" + cell
				}
			}
			row = append(row, cell)
		}
		t.Rows = append(t.Rows, row)
	}
	var open []string
	for _, r := range rows {
		if !r.NotRun && r.Metrics != nil && r.Metrics.OpenCalls > 0 {
			open = append(open, fmt.Sprintf("%s %.0f", r.Policy, r.Metrics.OpenCalls))
		}
	}
	if len(open) > 0 {
		t.Notes = append(t.Notes, "calls still open at the end of the run (counted in the latency percentiles): "+strings.Join(open, ", "))
	}
	return t
}

// FormatShare formats a share (0.123) as a percentage with one decimal
// ("12.3%").
func FormatShare(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// FormatMS formats a duration in milliseconds with two or three
// significant digits: "4.5ms", "45ms", "4.50s", "45s".
func FormatMS(ms float64) string {
	switch {
	case ms >= 10_000:
		return fmt.Sprintf("%.0fs", ms/1000)
	case ms >= 1000:
		return fmt.Sprintf("%.2fs", ms/1000)
	case ms >= 10:
		return fmt.Sprintf("%.0fms", ms)
	default:
		return fmt.Sprintf("%.1fms", ms)
	}
}

// ampCell shows Amplification, with its confidence interval over the
// trials when there are several.
func ampCell(m *Metrics) string {
	if m.AmplificationCI > 0 {
		return fmt.Sprintf("%.1fx ±%.1f", m.Amplification, m.AmplificationCI)
	}
	return fmt.Sprintf("%.1fx", m.Amplification)
}

// syncCell shows SyncShare with the retries it is a share of, or "–" below
// SyncMinRetries.
func syncCell(m *Metrics) string {
	if m.Retries < SyncMinRetries {
		return "–"
	}
	return FormatShare(m.SyncShare) + " of " + Commas(int(m.Retries+0.5))
}

// kurtosisCell shows Kurtosis beside its Poisson expectation.
func kurtosisCell(m *Metrics) string {
	if m.KurtosisPoisson == 0 {
		return fmt.Sprintf("%.1f", m.Kurtosis)
	}
	return fmt.Sprintf("%.1f (%.1f)", m.Kurtosis, m.KurtosisPoisson)
}

// latencyCell shows a latency percentile, as "> value" when it fell on a
// call still open at the end of the run in at least half the trials.
func latencyCell(ms, open float64) string {
	if open >= 0.5 {
		return "> " + FormatMS(ms)
	}
	return FormatMS(ms)
}

// recoveryCell shows Metrics.RecoveryS, with the share of trials that
// recovered when only some did; "unobserved" when no trial left a window
// of traffic after the fault to judge, and "stuck" only when trials that
// could show recovery did not.
func recoveryCell(m *Metrics) string {
	switch {
	case m.Recovered == 0 && m.Unobserved >= 1:
		return "unobserved"
	case m.Recovered == 0:
		return "stuck"
	case m.Recovered < 1:
		return fmt.Sprintf("%.1fs (%.0f%%)", m.RecoveryS, 100*m.Recovered)
	default:
		return fmt.Sprintf("%.1fs", m.RecoveryS)
	}
}
