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
	// MeshRetries (mesh_retries, default false) declares that the service
	// mesh in front of the server retries the requests it forwards, so
	// that a request carrying x-envoy-attempt-count, even a count of 1,
	// comes from a caller that retries. It is not part of retry.Policy: a
	// server reads it through the policy's Handle, which is a
	// layer.MeshSource (layer.WithMeshRetriesFrom(handle)), and so follows
	// reloads.
	MeshRetries bool
}

var nestedRules = []string{"one_layer", "budget", "ignore"}

var nestedFields = []string{"rule", "budget", "mesh_retries"}

// MeshRetries reports whether the policy in force declares that the
// service mesh in front of the server retries (nested.mesh_retries), so
// that a *Handle is a layer.MeshSource: pass it to
// layer.WithMeshRetriesFrom and the declaration follows every reload. A
// name the file does not cover declares false. It is one atomic load.
func (h *Handle) MeshRetries() bool {
	s := h.spec.Load()
	return s != nil && s.Nested.MeshRetries
}

// nested reads a policy's nested key: a rule name (one_layer or ignore),
// or a mapping {rule, budget, mesh_retries}; the rule budget needs a
// budget, the others take none; mesh_retries is true or false.
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
		case "mesh_retries":
			s.MeshRetries = d.nestedBool(v, fp)
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

// nestedBool reads a YAML boolean (true or false, as YAML 1.2 spells
// them; YAML 1.1's yes/no/on/off are refused, as ambiguous).
func (d *decoder) nestedBool(n *yaml.Node, path string) bool {
	v, ok := d.scalar(n, path)
	if !ok {
		return false
	}
	switch v {
	case "true", "True", "TRUE":
		return true
	case "false", "False", "FALSE":
		return false
	}
	d.fail(n, path, "%q is not true or false", v)
	return false
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
