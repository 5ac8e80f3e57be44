package promretry

import "github.com/stormguard/stormguard/retry"

// BudgetSource is what WatchBudget reads from a budget that has it: the
// budget package's Ratio, Window and Concurrency and redisstore's Budget
// implement it.
type BudgetSource interface {
	// Available returns the retries the budget would grant now (tokens).
	Available() float64
}

type budgetWatch struct {
	op  string
	src BudgetSource
}

// WatchBudget exports b's Available tokens as
// stormguard_retry_budget_tokens{operation}, read at every scrape. It
// takes any retry.Budget and degrades gracefully: a budget that is not a
// BudgetSource exports no tokens series (its refusals are still counted
// in stormguard_retry_budget_exhausted_total from the calls). Watching
// another budget under the same operation replaces the first one. The
// returned function stops watching (it is safe to call more than once).
// A nil Collector or budget does nothing.
//
// The Collector is a config.BudgetWatcher: given as config.Options.Observer
// (alone or in a retry.Multi), it is told each operation's budget, under
// the operation's name, so the tokens join the call metrics on operation.
func (c *Collector) WatchBudget(operation string, b retry.Budget) (unwatch func()) {
	if un, ok := c.watchedKeyed(operation, b); ok {
		return un
	}
	src, ok := b.(BudgetSource)
	if c == nil || !ok {
		return func() {}
	}
	label := c.ops.Get(operation).name
	w := &budgetWatch{op: label, src: src}
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
