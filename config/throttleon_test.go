package config

import (
	"context"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/throttle"
)

// TestAWSAdaptiveSeesAWSThrottleCodes (issue #31 item 21): kind
// aws_adaptive must treat the AWS throttling codes (an HTTP 400
// ThrottlingException) as throttling by default, and throttle_on may name
// another classification.
func TestAWSAdaptiveSeesAWSThrottleCodes(t *testing.T) {
	awsThrottle := awsCoded("ThrottlingException")
	unavailable := &httpretry.StatusError{StatusCode: 503}
	for _, tc := range []struct {
		limiter   string
		err       error
		throttled bool
	}{
		{"{kind: aws_adaptive}", awsThrottle, true},
		{"{kind: aws_adaptive}", unavailable, false},
		{"{kind: aws_adaptive, throttle_on: aws}", awsThrottle, true},
		{"{kind: aws_adaptive, throttle_on: overload}", awsThrottle, false},
		{"{kind: aws_adaptive, throttle_on: overload}", unavailable, true},
		{"{kind: aws_adaptive, throttle_on: [aws, overload]}", unavailable, true},
		{"{kind: aws_adaptive, throttle_on: [aws, overload]}", awsThrottle, true},
		{"{kind: sre}", awsThrottle, false},
		{"{kind: sre}", unavailable, true},
		{"{kind: sre, throttle_on: aws}", awsThrottle, true},
		{"{kind: sre, throttle_on: aws}", unavailable, false},
	} {
		r := NewRegistry(Options{Logger: discard})
		if err := r.Apply(mustParse(t, "policies: {api: {limiter: "+tc.limiter+"}}")); err != nil {
			t.Fatal(err)
		}
		lim := r.Policy("api").Policy().Limiter
		done, err := lim.Acquire(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		done(tc.err)
		var throttled bool
		switch l := lim.(type) {
		case *throttle.Adaptive:
			throttled = l.Stats().Enabled
		case *throttle.SRE:
			throttled = l.Stats().Accepts == 0
		}
		if throttled != tc.throttled {
			t.Errorf("%s after %v: throttled=%v, want %v", tc.limiter, tc.err, throttled, tc.throttled)
		}
	}
	for src, want := range map[string]string{
		"{kind: aws_adaptive, throttle_on: aws_throttle}": `"aws_throttle" is not one of aws, overload`,
		"{kind: sre, throttle_on: []}":                    "throttle_on: an empty list",
	} {
		_, err := Parse("p.yaml", []byte("policies: {api: {limiter: "+src+"}}"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}
