package sim

import (
	"fmt"
	"strconv"
	"time"
)

// Commas formats n with thousands separators: 5000 is "5,000".
func Commas(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// FaultSpan describes the window of fault f as a run of the given
// duration sees it: "for 3s"; "for 2s (cut from 20s by the 12s run)" when
// the run ends inside it; "never (planned at 20s-40s, after the 4s run
// ends)" when it starts after the traffic stops.
func FaultSpan(f Fault, duration time.Duration) string {
	planned := f.End - f.Start
	switch {
	case f.Start >= duration:
		return fmt.Sprintf("never (planned at %v-%v, after the %v run ends)", f.Start, f.End, duration)
	case f.End > duration:
		return fmt.Sprintf("for %v (cut from %v by the %v run)", duration-f.Start, planned, duration)
	}
	return "for " + planned.String()
}

// offeredPerS is the clients' mean call rate per second.
func (m *Model) offeredPerS() float64 {
	switch m.Arrival.Kind {
	case Poisson:
		return float64(m.Clients) * m.Arrival.Rate
	case Periodic:
		return float64(m.Clients) / m.Arrival.Interval.Seconds()
	}
	return 0
}

// asRun is the line a report's description starts with when options
// changed the scenario's model: the figures of the fixed text describe
// the defaults.
func asRun(def, run *Model) string {
	if def.Clients == run.Clients && def.Duration == run.Duration {
		return ""
	}
	return fmt.Sprintf("As run: %s clients for %v (the text below describes the defaults, %s clients for %v).\n",
		Commas(run.Clients), run.Duration, Commas(def.Clients), def.Duration)
}
