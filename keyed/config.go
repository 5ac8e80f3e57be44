package keyed

import (
	"errors"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/clock"
)

// Config bounds a Group. The zero value is a group of at most
// DefaultMaxKeys members, each removed after DefaultIdle unused, on the
// real clock.
type Config struct {
	// MaxKeys bounds the live members, the default and overflow members
	// aside. 0: DefaultMaxKeys. Negative or above MaxMaxKeys: New refuses
	// the config (ErrConfig). The group keeps each live member's key as
	// given, so what it holds is MaxKeys members and keys: key functions
	// should give short keys (a host, a method), as the adapters' do.
	MaxKeys int
	// Idle is how long a member may go unused before it is removed. It is
	// removed no sooner, and usually within a quarter of Idle after (once
	// housekeeping reaches it: when new keys arrive, or at Sweep).
	// 0: DefaultIdle. Negative: refused.
	Idle time.Duration
	// Clock measures idleness. nil: clock.Real.
	Clock clock.Clock
}

// Defaults and limits of Config.
const (
	DefaultMaxKeys = 1000
	// MaxMaxKeys is the largest MaxKeys accepted: ten million.
	MaxMaxKeys  = 10_000_000
	DefaultIdle = 5 * time.Minute
)

// ErrConfig is matched (errors.Is) by the error of a Config New refuses.
var ErrConfig = errors.New("keyed: invalid config")

// Validate returns nil, or an error naming the field and its limit that
// matches ErrConfig.
func (c Config) Validate() error {
	if c.MaxKeys < 0 || c.MaxKeys > MaxMaxKeys {
		return fmt.Errorf("%w: MaxKeys %d is out of range: want 1 to %d (0: the default %d)", ErrConfig, c.MaxKeys, MaxMaxKeys, DefaultMaxKeys)
	}
	if c.Idle < 0 {
		return fmt.Errorf("%w: Idle %v is negative (0: the default %v)", ErrConfig, c.Idle, DefaultIdle)
	}
	return nil
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.MaxKeys == 0 {
		c.MaxKeys = DefaultMaxKeys
	}
	if c.Idle == 0 {
		c.Idle = DefaultIdle
	}
	c.Clock = clock.Or(c.Clock)
	return c
}
