package config

import (
	"strings"

	"github.com/stormguard/stormguard/retry"
	"go.yaml.in/yaml/v3"
)

// NestedSpec is a policy's layer rule (retry.Policy.Nested): what its calls
// do when the inbound request that caused them comes from a caller that
// retries it itself.
type NestedSpec struct {
	// Rule is retry.NestedOneLayer when the file leaves nested out.
	Rule retry.NestedRule
	// Budget grants the retries a call may still make under the rule
	// NestedBudget (retry.Policy.NestedBudget); nil for the other rules.
	Budget *BudgetSpec
}

var nestedRules = []string{"one_layer", "budget", "ignore"}

var nestedFields = []string{"rule", "budget"}

// nested reads a policy's nested key: a rule name (one_layer or ignore),
// or a mapping {rule, budget}; the rule budget needs a budget, the others
// take none.
func (d *decoder) nested(n *yaml.Node, path string) NestedSpec {
	var s NestedSpec
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		s.Rule = ruleOf(d.oneOf(n, path, nestedRules))
		if s.Rule == retry.NestedBudget {
			d.fail(n, path, "rule budget needs its budget: write nested: {rule: budget, budget: {kind: ratio, ...}}")
		}
		return s
	}
	var ruleNode, budgetNode *yaml.Node
	d.fields(n, path, nestedFields, func(key string, v *yaml.Node, fp string) {
		switch key {
		case "rule":
			ruleNode = v
			s.Rule = ruleOf(d.oneOf(v, fp, nestedRules))
		case "budget":
			budgetNode = v
			s.Budget = d.budget(v, fp)
		}
	})
	if n.Kind != yaml.MappingNode {
		return s
	}
	switch {
	case ruleNode == nil:
		d.fail(n, join(path, "rule"), "missing: one of %s", strings.Join(nestedRules, ", "))
	case s.Rule == retry.NestedBudget && budgetNode == nil:
		d.fail(ruleNode, join(path, "budget"), "missing: rule budget retries only what its budget grants, and without one it never retries (that is one_layer)")
	case s.Rule != retry.NestedBudget && budgetNode != nil:
		d.fail(budgetNode, join(path, "budget"), "applies only to rule budget, not %s", s.Rule)
		s.Budget = nil
	}
	return s
}

// ruleOf maps a rule name to its retry.NestedRule ("" to the zero rule).
func ruleOf(name string) retry.NestedRule {
	for i, r := range nestedRules {
		if r == name {
			return retry.NestedRule(i)
		}
	}
	return retry.NestedOneLayer
}
