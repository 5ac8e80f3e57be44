package prometheus

// BudgetSource is what WatchBudget reads: the budget package's Ratio,
// Window and Concurrency implement it.
type BudgetSource interface {
	// Available returns the retries the budget would grant now (tokens).
	Available() float64
}

type budgetWatch struct {
	op  string
	src BudgetSource
}

// WatchBudget exports b's Available tokens as
// stormguard_retry_budget_tokens{operation}, read at every scrape. Watching
// another budget under the same operation replaces the first one. The
// returned function stops watching (it is safe to call more than once).
// A nil Collector or source does nothing.
func (c *Collector) WatchBudget(operation string, b BudgetSource) (unwatch func()) {
	if c == nil || b == nil {
		return func() {}
	}
	label := c.ops.Get(operation).name
	w := &budgetWatch{op: label, src: b}
	c.mu.Lock()
	c.budgets[label] = w
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.budgets[label] == w {
			delete(c.budgets, label)
		}
		c.mu.Unlock()
	}
}
