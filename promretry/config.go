package promretry

import "errors"

// ConfigReload implements the config package's ReloadObserver: a policy
// file that was applied sets stormguard_config_info{version} to 1 (and
// drops the previous version's series) and counts
// stormguard_config_reloads_total{result="success"}; a rejected file counts
// result="failure" and leaves the version in force unchanged; a file watcher
// error (config reports it with ReloadResult "watch_error") counts
// result="watch_error". Pass the
// Collector as config.Options.Observer to get both.
func (c *Collector) ConfigReload(version string, err error) {
	if c == nil {
		return
	}
	if err != nil {
		c.configReloads.WithLabelValues(reloadResult(err)).Inc()
		return
	}
	c.configReloads.WithLabelValues("success").Inc()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.configInfo.Reset()
	c.configInfo.WithLabelValues(version).Set(1)
}

// reloadResult is the result label of a failed reload: the error's own
// (config's watcher errors say "watch_error") or "failure".
func reloadResult(err error) string {
	var r interface{ ReloadResult() string }
	if errors.As(err, &r) {
		switch v := r.ReloadResult(); v {
		case "failure", "watch_error":
			return v // a fixed label set, whatever the error says
		}
	}
	return "failure"
}
