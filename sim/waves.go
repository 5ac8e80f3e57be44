package sim

import (
	"fmt"
	"strings"
)

// Wave detection (see Waves).
const (
	// WaveRise: a wave is a step whose retry rate is at least WaveRise
	// times the mean of the WaveLookback steps before it.
	WaveRise = 1.75
	// WaveLookback is the number of steps (ChartStep each) a step is
	// compared with, and the least distance between two waves.
	WaveLookback = 5
	// WaveShare: a wave's retry rate is at least WaveShare of the highest
	// retry rate of the series (small bumps are not waves).
	WaveShare = 0.05
	// MaxWaves bounds the waves reported per series.
	MaxWaves = 6
)

// Waves returns the times, in seconds from fromS, at which retries rise
// in a vertical wave after fromS: steps of the Retries series (stepMS
// wide) whose rate is at least WaveRise (1.75) times the mean of the
// WaveLookback (5) steps before it and at least WaveShare (5%) of the
// series' highest rate, at least WaveLookback steps apart, at most
// MaxWaves of them. Retries in lockstep (backoff without jitter) come
// back in such waves; jitter spreads them into a slope with none after
// the first.
func Waves(retries []float64, stepMS, fromS float64) []float64 {
	var top float64
	for _, v := range retries {
		top = max(top, v)
	}
	var out []float64
	last := -WaveLookback
	for i := WaveLookback; i < len(retries) && len(out) < MaxWaves; i++ {
		t := float64(i) * stepMS / 1000
		if t < fromS || i-last < WaveLookback {
			continue
		}
		var prev float64
		for _, v := range retries[i-WaveLookback : i] {
			prev += v / WaveLookback
		}
		if v := retries[i]; v > 0 && v >= WaveShare*top && v >= WaveRise*prev {
			out = append(out, t-fromS)
			last = i
		}
	}
	return out
}

// FormatWaves formats wave times as "+1.0s, +3.0s" ("none" without any).
func FormatWaves(ws []float64) string {
	if len(ws) == 0 {
		return "none"
	}
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("+%.1fs", w)
	}
	return strings.Join(parts, ", ")
}

// WaveMatch is how close a wave of another trial must be to one of the
// first trial's to count as the same wave (waveNote).
const WaveMatch = 0.2

// waveNote lists each policy's retry waves after the fault starts: those
// of the trial the charts show (the first finished), each with the number
// of trials that have a wave within WaveMatch of it when the case ran
// several.
func waveNote(c *Case) string {
	var parts []string
	n := 0
	for _, r := range c.Rows {
		if r.NotRun || r.Series == nil || len(r.Series.Retries) == 0 {
			continue
		}
		first := Waves(r.Series.Retries, r.Series.StepMS, c.FaultStartS)
		n = max(n, len(r.trials))
		if len(r.trials) < 2 || len(first) == 0 {
			parts = append(parts, r.Policy+" "+FormatWaves(first))
			continue
		}
		all := make([][]float64, len(r.trials))
		for i, s := range r.trials {
			all[i] = Waves(s.Retries, s.StepMS, c.FaultStartS)
		}
		var ws []string
		for _, w := range first {
			k := 0
			for _, tw := range all {
				for _, x := range tw {
					if x >= w-WaveMatch && x <= w+WaveMatch {
						k++
						break
					}
				}
			}
			ws = append(ws, fmt.Sprintf("+%.1fs (%d/%d)", w, k, len(r.trials)))
		}
		parts = append(parts, r.Policy+" "+strings.Join(ws, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	seen := ""
	if n > 1 {
		seen = fmt.Sprintf(", each with the trials of %d that show a wave within %.1fs of it", n, WaveMatch)
	}
	return fmt.Sprintf("retry waves after the fault starts in the charted trial (steps of %v whose retries reach %.2gx the half second before; marked on the charts%s): %s",
		ChartStep, WaveRise, seen, strings.Join(parts, "; "))
}
