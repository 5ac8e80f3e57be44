package admission_test

import (
	"math"
	"strings"
	"time"

	"github.com/stormguard/stormguard/admission"
)

func nan() float64                { return math.NaN() }
func contains(s, sub string) bool { return strings.Contains(s, sub) }

// gradLimit is a Limit with a Validate method that refuses its config:
// Config.Validate asks it.
type gradLimit struct{ c admission.Gradient2Config }

func (gradLimit) OnSample(time.Time, time.Duration, int, bool) {}
func (gradLimit) Limit() int                                   { return 1 }
func (g gradLimit) Validate() error                            { return g.c.Validate() }

func badGradient() admission.Limit { return gradLimit{c: admission.Gradient2Config{MinLimit: -1}} }
