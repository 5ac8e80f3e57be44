package retry

// Fusable is fusable, for the tests of package retry_test: whether Do's
// first attempt under p takes the fused path of internal/fastpath.
func Fusable(p *Policy) bool { return (p.Breaker != nil || p.Budget != nil) && fusable(p) }
