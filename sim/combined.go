package sim

import (
	"context"
	"slices"
)

// newCombinedScenario makes one scenario of a main ModelSpec and further
// specs whose tables follow the main one's (the retry-budget scenario's
// client sweep). Its policies are the union of theirs; each part runs
// the requested policies it knows (the extra parts only those they list
// or define), and is left out when none applies. The extra parts set
// their own client counts: Options.Clients reaches the main part only.
func newCombinedScenario(main ModelSpec, extras ...ModelSpec) (*Scenario, error) {
	sc, err := NewModelScenario(main)
	if err != nil {
		return nil, err
	}
	type part struct {
		sc    *Scenario
		names []string
	}
	var parts []part
	for _, e := range extras {
		s, err := NewModelScenario(e)
		if err != nil {
			return nil, err
		}
		names := slices.Clone(s.Policies)
		for _, v := range e.Custom {
			if !slices.Contains(names, v.Name) {
				names = append(names, v.Name)
			}
		}
		parts = append(parts, part{s, names})
		for _, p := range s.Policies {
			if !slices.Contains(sc.Policies, p) {
				sc.Policies = append(sc.Policies, p)
			}
		}
	}
	mainRun, mainOwn := sc.run, sc.own
	mainKnown := func(n string) bool {
		_, ok := CanonicalPolicy(n)
		return ok || mainOwn(n)
	}
	sc.own = func(n string) bool {
		if mainOwn(n) {
			return true
		}
		for _, p := range parts {
			if p.sc.own(n) {
				return true
			}
		}
		return false
	}
	sc.known = func(n string) bool {
		if mainKnown(n) {
			return true
		}
		for _, p := range parts {
			if p.sc.own(n) {
				return true
			}
		}
		return false
	}
	sc.run = func(ctx context.Context, o *Options) (*Report, error) {
		pick := func(ok func(string) bool) []string {
			var out []string
			for _, n := range o.Policies {
				if ok(n) {
					out = append(out, n)
				}
			}
			return out
		}
		var rep *Report
		if names := pick(mainKnown); len(names) > 0 {
			mo := *o
			mo.Policies = names
			r, err := mainRun(ctx, &mo)
			if err != nil {
				return r, err
			}
			rep = r
		}
		for _, p := range parts {
			names := pick(func(n string) bool { return slices.Contains(p.names, n) })
			if len(names) == 0 {
				continue
			}
			po := *o
			po.Policies, po.Clients, po.Progress = names, 0, nil
			r, err := p.sc.run(ctx, &po)
			if err != nil {
				return rep, err
			}
			if rep == nil {
				rep = &Report{Title: r.Title}
			}
			rep.Events += r.Events
			rep.Cases = append(rep.Cases, r.Cases...)
			rep.Tables = append(rep.Tables, r.Tables...)
			rep.Plots = append(rep.Plots, r.Plots...)
			rep.Verdict = append(rep.Verdict, r.Verdict...)
			for _, l := range r.PolicyLegend {
				if !slices.ContainsFunc(rep.PolicyLegend, func(x [2]string) bool { return x[0] == l[0] }) {
					rep.PolicyLegend = append(rep.PolicyLegend, l)
				}
			}
		}
		return rep, nil
	}
	return sc, nil
}
