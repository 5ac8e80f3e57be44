package faultinject

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The JSON form of Rules, also the shape of faultproxy's YAML files:
//
//	{
//	  "latency": "50ms", "jitter": "20ms",
//	  "abort": {"percent": 10, "status": 503, "retry_after": "2s"},
//	  "reset_percent": 1, "hang_percent": 0.5,
//	  "outages": [{"start": "10s", "end": "20s", "action": "abort", "status": 503, "retry_after": "1s"}],
//	  "outage_cycle": "1m",
//	  "limit": {"concurrency": 8, "queue": 16, "queue_timeout": "1s", "status": 503, "retry_after": "1s"}
//	}
//
// Durations are Go duration strings ("1m30s"; a bare 0 is accepted);
// percentages are numbers or strings such as "0.5%". Every field is
// optional; unknown fields are an error.
type rulesJSON struct {
	Latency      jsonDuration `json:"latency"`
	Jitter       jsonDuration `json:"jitter"`
	Abort        abortJSON    `json:"abort"`
	ResetPercent jsonPercent  `json:"reset_percent"`
	HangPercent  jsonPercent  `json:"hang_percent"`
	Outages      []windowJSON `json:"outages"`
	OutageCycle  jsonDuration `json:"outage_cycle"`
	Limit        limitJSON    `json:"limit"`
}

type abortJSON struct {
	Percent    jsonPercent  `json:"percent"`
	Status     int          `json:"status"`
	RetryAfter jsonDuration `json:"retry_after"`
}

type windowJSON struct {
	Start      jsonDuration `json:"start"`
	End        jsonDuration `json:"end"`
	Action     *Action      `json:"action"` // absent: abort
	Status     int          `json:"status"`
	RetryAfter jsonDuration `json:"retry_after"`
}

type limitJSON struct {
	Concurrency  int          `json:"concurrency"`
	Queue        int          `json:"queue"`
	QueueTimeout jsonDuration `json:"queue_timeout"`
	Status       int          `json:"status"`
	RetryAfter   jsonDuration `json:"retry_after"`
}

// MarshalJSON writes r in the form ParseRules reads, every field present.
func (r Rules) MarshalJSON() ([]byte, error) {
	w := rulesJSON{
		Latency: jsonDuration(r.Latency), Jitter: jsonDuration(r.Jitter),
		Abort:        abortJSON{jsonPercent(r.Abort.Percent), r.Abort.Status, jsonDuration(r.Abort.RetryAfter)},
		ResetPercent: jsonPercent(r.ResetPercent), HangPercent: jsonPercent(r.HangPercent),
		Outages:     make([]windowJSON, len(r.Outages)),
		OutageCycle: jsonDuration(r.OutageCycle),
		Limit: limitJSON{r.Limit.Concurrency, r.Limit.Queue, jsonDuration(r.Limit.QueueTimeout),
			r.Limit.Status, jsonDuration(r.Limit.RetryAfter)},
	}
	for i, o := range r.Outages {
		a := o.action()
		w.Outages[i] = windowJSON{jsonDuration(o.Start), jsonDuration(o.End), &a, o.Status, jsonDuration(o.RetryAfter)}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the form MarshalJSON writes; absent fields are zero
// and unknown fields are an error. It does not validate: see ParseRules.
func (r *Rules) UnmarshalJSON(b []byte) error {
	var w rulesJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("faultinject: rules: %w", err)
	}
	out := Rules{
		Latency: time.Duration(w.Latency), Jitter: time.Duration(w.Jitter),
		Abort:        AbortRule{float64(w.Abort.Percent), w.Abort.Status, time.Duration(w.Abort.RetryAfter)},
		ResetPercent: float64(w.ResetPercent), HangPercent: float64(w.HangPercent),
		OutageCycle: time.Duration(w.OutageCycle),
		Limit: Limit{w.Limit.Concurrency, w.Limit.Queue, time.Duration(w.Limit.QueueTimeout),
			w.Limit.Status, time.Duration(w.Limit.RetryAfter)},
	}
	for i, o := range w.Outages {
		a := Abort
		if o.Action != nil {
			a = *o.Action
		}
		if a != Abort && a != Reset && a != Hang {
			return fmt.Errorf("faultinject: rules: outage %d: action %q is not abort, reset or hang", i, a)
		}
		out.Outages = append(out.Outages, Window{time.Duration(o.Start), time.Duration(o.End), a, o.Status, time.Duration(o.RetryAfter)})
	}
	*r = out
	return nil
}

// ParseRules reads rules in their JSON form (see Rules.MarshalJSON) and
// validates them. Errors wrap ErrInvalidRules when the rules parse but are
// not valid.
func ParseRules(data []byte) (Rules, error) {
	var r Rules
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		if !strings.HasPrefix(err.Error(), "faultinject: ") { // a syntax error, or no data
			err = fmt.Errorf("faultinject: rules: %w", err)
		}
		return Rules{}, err
	}
	if dec.More() {
		return Rules{}, errors.New("faultinject: rules: data after the rules object")
	}
	if err := r.Validate(); err != nil {
		return Rules{}, err
	}
	return r, nil
}

// ParseDuration parses a non-negative Go duration such as "250ms" or
// "1m30s"; "0" is zero. Surrounding spaces are ignored.
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("faultinject: bad duration %q (want e.g. 250ms or 1m30s)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("faultinject: negative duration %q", s)
	}
	return d, nil
}

// ParsePercent parses a percentage in [0, 100] such as "12.5", "12.5%" or
// "0.1 %". Surrounding spaces are ignored.
func ParsePercent(s string) (float64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSpace(strings.TrimSuffix(t, "%"))
	p, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(p) || math.IsInf(p, 0) {
		return 0, fmt.Errorf("faultinject: bad percentage %q (want e.g. 12.5 or 12.5%%)", s)
	}
	if p < 0 || p > 100 {
		return 0, fmt.Errorf("faultinject: percentage %q is outside [0, 100]", s)
	}
	return p, nil
}

// jsonDuration is a time.Duration written as a Go duration string.
type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	if string(b) == "0" || string(b) == "null" {
		*d = 0
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("faultinject: duration %s is not a string such as \"250ms\"", b)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = jsonDuration(v)
	return nil
}

// jsonPercent is a percentage read from a number or a string like "5%".
type jsonPercent float64

func (p *jsonPercent) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*p = 0
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := ParsePercent(s)
		*p = jsonPercent(v)
		return err
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("faultinject: percentage %s is not a number", b)
	}
	*p = jsonPercent(f)
	return nil
}
