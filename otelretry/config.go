package otelretry

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Attribute keys of the config metrics (the promretry module's label
// names).
const (
	keyResult  = attribute.Key("result")
	keyVersion = attribute.Key("version")
)

// The result attribute sets of stormguard.config.reloads, built once.
var (
	reloadSuccess    = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(keyResult.String("success")))}
	reloadFailure    = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(keyResult.String("failure")))}
	reloadWatchError = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(keyResult.String("watch_error")))}
)

// ConfigReload implements the config package's ReloadObserver, as the
// promretry module's Collector does: a policy file that was applied
// counts stormguard.config.reloads{result="success"} and makes version the
// one stormguard.config.info{version} reports (value 1; the previous
// version is no longer reported); a rejected file counts
// result="failure" and leaves the version in force unchanged. Pass the
// Observer as config.Options.Observer to get both.
func (o *Observer) ConfigReload(version string, err error) {
	if o == nil {
		return
	}
	if err != nil {
		opts := reloadFailure
		var r interface{ ReloadResult() string }
		if errors.As(err, &r) && r.ReloadResult() == "watch_error" {
			opts = reloadWatchError
		}
		o.configReloads.Add(context.Background(), 1, opts...)
		return
	}
	o.configReloads.Add(context.Background(), 1, reloadSuccess...)
	opts := []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(keyVersion.String(version)))}
	o.mu.Lock()
	o.configVersion = opts
	o.mu.Unlock()
}

// observeConfig is the config.info gauge's callback: 1 for the version in
// force, nothing before the first file is applied.
func (o *Observer) observeConfig(_ context.Context, obs metric.Int64Observer) error {
	o.mu.Lock()
	opts := o.configVersion
	o.mu.Unlock()
	if opts != nil {
		obs.Observe(1, opts...)
	}
	return nil
}
