package retry

// PricedBudget is implemented by a Budget whose retries do not all cost the
// same and that gives a successful retry back what it paid, such as
// budget.Ratio with a TimeoutCost or a ThrottleCost: the AWS SDKs' retry
// quota refunds exactly the cost of the retry that succeeded (5 after a
// throttle, 14 otherwise, in the 2026 standard mode; 10 after a timeout, 5
// otherwise, before 2026). Record alone cannot say which retry an attempt
// was, and a budget shared by many calls cannot tell.
//
// When Policy.Budget implements PricedBudget, Call (and so Do) asks
// WithdrawPriced instead of Withdraw before each retry, keeps the price the
// grant returned with the attempt that the grant pays for, and ends that
// attempt with RecordPriced(err, price) instead of Record(true, err).
// First attempts are still recorded with Record(false, err); an attempt
// that no WithdrawPriced of its Call paid for (a hedge, which hedge grants
// with Withdraw) is recorded with Record(true, err). A grant whose retry is
// never made (the caller gave up during the wait, the breaker refused it)
// is not given back, as in the AWS SDKs; a BudgetTracker still hears
// Refund for it.
type PricedBudget interface {
	Budget
	// WithdrawPriced is Withdraw, and also returns what the granted retry
	// paid, in the budget's own unit (0 when it refuses).
	WithdrawPriced(err error) (price int64, ok bool)
	// RecordPriced is Record(true, err) for a retry attempt whose grant's
	// WithdrawPriced returned price.
	RecordPriced(err error, price int64)
}

// grant is a retry granted by a PricedBudget: what it paid, and whether
// there is one.
type grant struct {
	price  int64
	priced bool
}

// withdraw asks the Policy's Budget (not nil) for a retry after err; a
// PricedBudget's grant is kept for the next Begin.
func (c *Call) withdraw(err error) bool {
	pb, ok := c.p.Budget.(PricedBudget)
	if !ok {
		return c.p.Budget.Withdraw(err)
	}
	price, granted := pb.WithdrawPriced(err)
	if granted {
		c.grant = grant{price: price, priced: true}
	}
	return granted
}

// record tells the Policy's Budget (not nil) how attempt a ended: with the
// price its grant paid when a PricedBudget granted it.
func (c *Call) record(a *Attempt, err error) {
	if a.grant.priced {
		if pb, ok := c.p.Budget.(PricedBudget); ok {
			pb.RecordPriced(err, a.grant.price)
			return
		}
	}
	c.p.Budget.Record(a.N > 1, err)
}
