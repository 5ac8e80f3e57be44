package live

import "context"

// The names RunSlowdownHedging and its types had before they were named
// after the command line's "slowdown-hedging" (sim's brownout is another
// model: a capacity loss fought with retry limiters).

// RunBrownout runs RunSlowdownHedging.
//
// Deprecated: use RunSlowdownHedging.
func RunBrownout(ctx context.Context, opts BrownoutOptions) (*BrownoutReport, error) {
	return RunSlowdownHedging(ctx, opts)
}

// BrownoutPolicies returns SlowdownHedgingPolicies(), its former name.
//
// Deprecated: use SlowdownHedgingPolicies.
func BrownoutPolicies() []BrownoutPolicy { return SlowdownHedgingPolicies() }

// BrownoutOptions is SlowdownHedgingOptions.
//
// Deprecated: use SlowdownHedgingOptions.
type BrownoutOptions = SlowdownHedgingOptions

// BrownoutReport is SlowdownHedgingReport.
//
// Deprecated: use SlowdownHedgingReport.
type BrownoutReport = SlowdownHedgingReport

// BrownoutRow is SlowdownHedgingRow.
//
// Deprecated: use SlowdownHedgingRow.
type BrownoutRow = SlowdownHedgingRow

// BrownoutPolicy is SlowdownHedgingPolicy.
//
// Deprecated: use SlowdownHedgingPolicy.
type BrownoutPolicy = SlowdownHedgingPolicy

// The policies' names and the defaults under their former names.
//
// Deprecated: use SlowdownNoHedge, SlowdownHedge, SlowdownHedgeBudget,
// SlowdownHedgingTitle and the DefaultSlowdown constants.
const (
	BrownoutNoHedge            = SlowdownNoHedge
	BrownoutHedge              = SlowdownHedge
	BrownoutHedgeBudget        = SlowdownHedgeBudget
	BrownoutTitle              = SlowdownHedgingTitle
	DefaultBrownoutClients     = DefaultSlowdownClients
	DefaultBrownoutDuration    = DefaultSlowdownDuration
	DefaultBrownoutInterval    = DefaultSlowdownInterval
	DefaultBrownoutService     = DefaultSlowdownService
	DefaultBrownoutSlowService = DefaultSlowdownSlowService
	DefaultBrownoutDelay       = DefaultSlowdownDelay
	DefaultBrownoutCallTimeout = DefaultSlowdownCallTimeout
	DefaultBrownoutMaxCalls    = DefaultSlowdownMaxCalls
)
