package simtest

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// DownstreamReport is Downstream as the report prints it, defaults filled
// in, distributions and durations in the file's syntax.
type DownstreamReport struct {
	Clients  int     `json:"clients"`
	Rate     float64 `json:"rate_per_s"`
	Workers  int     `json:"workers"`
	Capacity float64 `json:"capacity_per_s"`
	Service  string  `json:"service"`
	Queue    int     `json:"queue"`
	Latency  string  `json:"latency"`
	Timeout  string  `json:"timeout"`
	Degrade  *struct {
		Knee  int     `json:"knee"`
		Slope float64 `json:"slope"`
		Max   float64 `json:"max,omitempty"`
	} `json:"degrade,omitempty"`
}

// json returns the report's view of the resolved d.
func (d Downstream) json() DownstreamReport {
	out := DownstreamReport{Clients: d.Clients, Rate: d.Rate, Workers: d.Workers, Capacity: d.Capacity,
		Service: d.Service.String(), Queue: d.Queue, Latency: d.Latency.String(), Timeout: d.Timeout.String()}
	if d.Degrade.Slope > 0 {
		out.Degrade = &struct {
			Knee  int     `json:"knee"`
			Slope float64 `json:"slope"`
			Max   float64 `json:"max,omitempty"`
		}{d.Degrade.Knee, d.Degrade.Slope, d.Degrade.MaxFactor}
	}
	return out
}

// GatesReport is Gates as the report prints them, in the file's syntax:
// defaults filled in at the top, "none" when not gated, "" (left out) in
// a storm's gates for a limit it takes from the top.
type GatesReport struct {
	MaxAmplification string                 `json:"max_amplification,omitempty"`
	MaxRecovery      string                 `json:"max_recovery,omitempty"`
	MinSuccess       float64                `json:"min_success,omitempty"`
	Storms           map[string]GatesReport `json:"storms,omitempty"`
}

func (g Gates) json() GatesReport {
	rec := func(d time.Duration, top bool) string {
		switch {
		case d == NoRecoveryLimit:
			return "none"
		case d == 0 && top:
			return DefaultMaxRecovery.String()
		case d == 0:
			return ""
		}
		return d.String()
	}
	amp := func(a float64, top bool) string {
		switch {
		case a == NoAmplificationLimit:
			return "none"
		case a == 0 && top:
			return strconv.Itoa(DefaultMaxAmplification)
		case a == 0:
			return ""
		}
		return strconv.FormatFloat(a, 'g', -1, 64)
	}
	out := GatesReport{MaxAmplification: amp(g.MaxAmplification, true), MaxRecovery: rec(g.MaxRecovery, true), MinSuccess: g.MinSuccess}
	for name, s := range g.Storms {
		if out.Storms == nil {
			out.Storms = map[string]GatesReport{}
		}
		out.Storms[name] = GatesReport{MaxAmplification: amp(s.MaxAmplification, false), MaxRecovery: rec(s.MaxRecovery, false), MinSuccess: s.MinSuccess}
	}
	return out
}

// StormInfo describes a storm of the report: its name, title, what
// happens, and when the trigger starts and ends (seconds of the run).
type StormInfo struct {
	Name   string  `json:"name"`
	Title  string  `json:"title"`
	Doc    string  `json:"doc"`
	StartS float64 `json:"trigger_start_s"`
	EndS   float64 `json:"trigger_end_s"`
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as the command prints it: the downstream,
// then a table per policy with its weakest point, then a verdict line per
// policy.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	d := r.Downstream
	if r.File != "" {
		fmt.Fprintf(&b, "%s (version %s), seed %d\n", r.File, r.Version, r.Seed)
	}
	fmt.Fprintf(&b, "downstream: %d workers × service %s (capacity %.0f/s), queue %d, latency %s; "+
		"fleet of %d clients at %.0f calls/s; client timeout %s\n",
		d.Workers, d.Service, d.Capacity, d.Queue, d.Latency, d.Clients, d.Rate, d.Timeout)
	fmt.Fprintf(&b, "gates: %s\n\n", r.Gates.describe())
	for _, p := range r.Policies {
		fmt.Fprintf(&b, "%s\n", p.Policy)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  storm\tpeak×\tmean×\trecovery\tsuccess\tp99\tverdict")
		for _, s := range p.Storms {
			verdict := "pass"
			if len(s.Failures) > 0 {
				var gates []string
				for _, f := range s.Failures {
					gates = append(gates, f.Gate)
				}
				verdict = "FAIL " + strings.Join(gates, ",")
			}
			p99 := fmtMS(s.P99ms)
			if s.P99Open {
				p99 = "> " + p99
			}
			if s.Runaway != "" {
				fmt.Fprintf(tw, "  %s\t–\t–\trunaway\t–\t–\t%s\n", s.Storm, verdict)
				continue
			}
			fmt.Fprintf(tw, "  %s\t%.2f\t%.2f\t%s\t%.1f%%\t%s\t%s\n", s.Storm, s.PeakAmplification, s.MeanAmplification,
				recoveryCell(s), 100*s.SuccessRate, p99, verdict)
		}
		tw.Flush()
		fmt.Fprintf(&b, "  weakest point: %s\n", p.Weakest)
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
		b.WriteString("\n")
	}
	for _, p := range r.Policies {
		if p.Pass {
			fmt.Fprintf(&b, "PASS %s\n", p.Policy)
		} else {
			fmt.Fprintf(&b, "FAIL %s\n", p.Policy)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func recoveryCell(s StormResult) string {
	if s.Runaway != "" {
		return "runaway"
	}
	if !s.Recovered {
		return "stuck"
	}
	return fmtSeconds(s.RecoveryS)
}

func fmtMS(ms float64) string {
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Millisecond).String()
}

func (g GatesReport) describe() string {
	var parts []string
	if g.MaxAmplification == "none" {
		parts = append(parts, "amplification not gated")
	} else {
		parts = append(parts, "peak amplification ≤ "+g.MaxAmplification+"×")
	}
	if g.MaxRecovery == "none" {
		parts = append(parts, "recovery not gated")
	} else {
		parts = append(parts, "recovery within "+g.MaxRecovery)
	}
	if g.MinSuccess > 0 {
		parts = append(parts, fmt.Sprintf("success ≥ %.1f%%", 100*g.MinSuccess))
	}
	s := strings.Join(parts, ", ")
	for _, name := range sortedKeys(g.Storms) {
		sg := g.Storms[name]
		var sp []string
		if sg.MaxAmplification != "" {
			sp = append(sp, "peak ≤ "+sg.MaxAmplification+"×")
		}
		if sg.MaxRecovery != "" {
			sp = append(sp, "recovery "+sg.MaxRecovery)
		}
		if sg.MinSuccess > 0 {
			sp = append(sp, fmt.Sprintf("success ≥ %.1f%%", 100*sg.MinSuccess))
		}
		s += fmt.Sprintf("; %s: %s", name, strings.Join(sp, ", "))
	}
	return s
}
