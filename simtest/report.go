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
	// Clients is the number of client instances in the fleet
	// (Downstream.Clients).
	Clients int `json:"clients"`
	// Rate is the fleet's steady call rate, in calls per second across
	// every client (Downstream.Rate).
	Rate float64 `json:"rate_per_s"`
	// Workers is how many requests the downstream serves at once.
	Workers int `json:"workers"`
	// Capacity is the requests per second the workers serve: Workers
	// divided by the mean service time. When the model set Capacity,
	// Workers was rounded up from it, so this may be a little above it.
	Capacity float64 `json:"capacity_per_s"`
	// Service is the distribution of the time one request holds a
	// worker, written as sim.Dist.String writes it ("uniform(10ms,30ms)").
	Service string `json:"service"`
	// Queue is how many requests may wait for a worker; -1: no queue.
	Queue int `json:"queue"`
	// Latency is the distribution of the one-way network latency of each
	// leg, written as Service is.
	Latency string `json:"latency"`
	// Timeout is the client's timeout of one attempt for the policies
	// that set no attempt_timeout, as time.Duration.String writes it
	// ("1s").
	Timeout string `json:"timeout"`
	// Degrade is the slow-down as the queue grows (sim.Degrade): past
	// Knee queued requests, service time is multiplied by
	// 1 + Slope·(queued−Knee)/Workers, capped at Max (left out when 0:
	// the cap is then 10). nil (left out) when Slope is 0: service never
	// slows down.
	Degrade *struct {
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

// GatesReport is Gates as the report prints them: numbers, defaults
// filled in at the top, null (nil) when not gated; in a storm's gates,
// only the limits it sets itself (left out otherwise).
type GatesReport struct {
	// MaxAmplification is the peak amplification limit (× the baseline).
	MaxAmplification *float64 `json:"max_amplification"`
	// MaxRecoveryS is the recovery limit in seconds.
	MaxRecoveryS *float64 `json:"max_recovery_s"`
	// MinSuccess is the least share of calls succeeding while the trigger
	// lasts and after it.
	MinSuccess *float64 `json:"min_success"`
	// PassBorderline says borderline results pass.
	PassBorderline bool `json:"pass_borderline"`
	// Storms are the per-storm limits, by storm.
	Storms map[string]StormGatesReport `json:"storms,omitempty"`
}

// StormGatesReport is the limits one storm sets itself.
type StormGatesReport struct {
	// MaxAmplification is the storm's own peak amplification limit (×
	// the baseline); nil (left out) when the storm does not set one, or
	// turns the gate off (NoAmplificationLimit).
	MaxAmplification *float64 `json:"max_amplification,omitempty"`
	// MaxRecoveryS is the storm's own recovery limit, in seconds; nil
	// (left out) when the storm does not set one, or turns the gate off
	// (NoRecoveryLimit).
	MaxRecoveryS *float64 `json:"max_recovery_s,omitempty"`
	// MinSuccess is the storm's own least share of calls succeeding,
	// while the trigger lasts and after it; nil (left out) when the
	// storm does not set one.
	MinSuccess *float64 `json:"min_success,omitempty"`
	// NoAmplificationLimit and NoRecoveryLimit say the storm turns the
	// gate off.
	NoAmplificationLimit bool `json:"no_amplification_limit,omitempty"`
	NoRecoveryLimit      bool `json:"no_recovery_limit,omitempty"`
}

func (g Gates) json() GatesReport {
	top := g.For("")
	out := GatesReport{PassBorderline: g.PassBorderline}
	if top.MaxAmplification > 0 {
		out.MaxAmplification = ptr(top.MaxAmplification)
	}
	if top.MaxRecovery > 0 {
		out.MaxRecoveryS = ptr(top.MaxRecovery.Seconds())
	}
	if top.MinSuccess > 0 {
		out.MinSuccess = ptr(top.MinSuccess)
	}
	for name, s := range g.Storms {
		if out.Storms == nil {
			out.Storms = map[string]StormGatesReport{}
		}
		var sg StormGatesReport
		switch {
		case s.MaxAmplification == NoAmplificationLimit:
			sg.NoAmplificationLimit = true
		case s.MaxAmplification > 0:
			sg.MaxAmplification = ptr(s.MaxAmplification)
		}
		switch {
		case s.MaxRecovery == NoRecoveryLimit:
			sg.NoRecoveryLimit = true
		case s.MaxRecovery > 0:
			sg.MaxRecoveryS = ptr(s.MaxRecovery.Seconds())
		}
		if s.MinSuccess > 0 {
			sg.MinSuccess = ptr(s.MinSuccess)
		}
		out.Storms[name] = sg
	}
	return out
}

// StormInfo describes a storm of the report: its name, title, what
// happens, and when the trigger starts and ends (seconds of the run).
type StormInfo struct {
	// Name is the storm's name, as Options.Storms and the gates name it.
	Name string `json:"name"`
	// Title is the storm's title (Storm.Title).
	Title string `json:"title"`
	// Doc says what happens in the storm (Storm.Doc).
	Doc string `json:"doc"`
	// StartS and EndS are when the trigger starts (StormStart) and ends
	// (StormStart + Storm.Length), in seconds from the start of the run.
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
		fmt.Fprintf(&b, "%s (version %s), ", r.File, r.Version)
	}
	fmt.Fprintf(&b, "seed %d, %d trials per storm, model %s\n", r.Seed, r.Trials, r.ModelVersion)
	fmt.Fprintf(&b, "downstream: %d workers × service %s (capacity %.0f/s), queue %d, latency %s; "+
		"fleet of %d clients at %.0f calls/s; client timeout %s\n",
		d.Workers, d.Service, d.Capacity, d.Queue, d.Latency, d.Clients, d.Rate, d.Timeout)
	fmt.Fprintf(&b, "gates: %s\n\n", r.Gates.describe())
	for _, p := range r.Policies {
		fmt.Fprintf(&b, "%s\n", p.Policy)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  storm\tpeak× (95% interval)\tmean×\trecovery\tsuccess storm\tsuccess after\tp99\thedges\tverdict")
		for _, s := range p.Storms {
			verdict := verdictCell(s, r.Gates.PassBorderline)
			if s.Runaway != "" {
				fmt.Fprintf(tw, "  %s\t–\t–\trunaway\t–\t–\t–\t–\t%s\n", s.Storm, verdict)
				continue
			}
			p99 := fmtMS(s.P99ms)
			if s.P99Open {
				p99 = "> " + p99
			}
			hedges := "–"
			if s.Hedges > 0 {
				hedges = fmt.Sprintf("%.2f/call, %.0f%% of load", s.Hedges, 100*s.HedgeLoad)
			}
			e := s.PeakAmplification
			fmt.Fprintf(tw, "  %s\t%.2f (%.2f–%.2f)\t%.2f\t%s\t%.1f%%\t%.1f%%\t%s\t%s\t%s\n", s.Storm, e.Mean, e.Low, e.High, s.MeanAmplification,
				recoveryCell(s), 100*s.SuccessStorm.Mean, 100*s.SuccessRecovery.Mean, p99, hedges, verdict)
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

// verdictCell is a storm's verdict: pass, FAIL with the gates failed,
// or BORDERLINE with the gates whose interval crosses the limit.
func verdictCell(s StormResult, passBorderline bool) string {
	var hard, border []string
	for _, f := range s.Failures {
		if f.Borderline {
			border = append(border, f.Gate)
		} else {
			hard = append(hard, f.Gate)
		}
	}
	var parts []string
	if len(hard) > 0 {
		parts = append(parts, "FAIL "+strings.Join(hard, ","))
	}
	if len(border) > 0 {
		word := "BORDERLINE (fails) "
		if passBorderline {
			word = "borderline (passes) "
		}
		parts = append(parts, word+strings.Join(border, ","))
	}
	if len(parts) == 0 {
		return "pass"
	}
	return strings.Join(parts, "; ")
}

func recoveryCell(s StormResult) string {
	switch {
	case s.Runaway != "":
		return "runaway"
	case s.RecoveredTrials == 0:
		return "stuck"
	case !s.Recovered:
		return fmt.Sprintf("stuck in %d/%d", len(s.Trials)-s.RecoveredTrials, len(s.Trials))
	}
	return fmtSeconds(s.RecoveryS.Mean)
}

func fmtMS(ms float64) string {
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Millisecond).String()
}

func (g GatesReport) describe() string {
	var parts []string
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	if g.MaxAmplification == nil {
		parts = append(parts, "amplification not gated")
	} else {
		parts = append(parts, "peak amplification ≤ "+num(*g.MaxAmplification)+"×")
	}
	if g.MaxRecoveryS == nil {
		parts = append(parts, "recovery not gated")
	} else {
		parts = append(parts, "recovery within "+fmtSeconds(*g.MaxRecoveryS))
	}
	if g.MinSuccess != nil {
		parts = append(parts, fmt.Sprintf("success ≥ %.1f%% during and after each storm", 100**g.MinSuccess))
	}
	if g.PassBorderline {
		parts = append(parts, "borderline results pass")
	} else {
		parts = append(parts, "borderline results fail")
	}
	s := strings.Join(parts, ", ")
	for _, name := range sortedKeys(g.Storms) {
		sg := g.Storms[name]
		var sp []string
		switch {
		case sg.NoAmplificationLimit:
			sp = append(sp, "amplification not gated")
		case sg.MaxAmplification != nil:
			sp = append(sp, "peak ≤ "+num(*sg.MaxAmplification)+"×")
		}
		switch {
		case sg.NoRecoveryLimit:
			sp = append(sp, "recovery not gated")
		case sg.MaxRecoveryS != nil:
			sp = append(sp, "recovery "+fmtSeconds(*sg.MaxRecoveryS))
		}
		if sg.MinSuccess != nil {
			sp = append(sp, fmt.Sprintf("success ≥ %.1f%%", 100**sg.MinSuccess))
		}
		s += fmt.Sprintf("; %s: %s", name, strings.Join(sp, ", "))
	}
	return s
}
