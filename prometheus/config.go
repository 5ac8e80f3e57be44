package prometheus

// ConfigReload implements the config package's ReloadObserver: a policy
// file that was applied sets stormguard_config_info{version} to 1 (and
// drops the previous version's series) and counts
// stormguard_config_reloads_total{result="success"}; a rejected file counts
// result="failure" and leaves the version in force unchanged. Pass the
// Collector as config.Options.Observer to get both.
func (c *Collector) ConfigReload(version string, err error) {
	if c == nil {
		return
	}
	if err != nil {
		c.configReloads.WithLabelValues("failure").Inc()
		return
	}
	c.configReloads.WithLabelValues("success").Inc()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.configInfo.Reset()
	c.configInfo.WithLabelValues(version).Set(1)
}
