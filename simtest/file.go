package simtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/sim"
	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a downstream or gates section: where it
// is and what, formatted like config.Problem ("file:line: path: message").
type Problem = config.Problem

// Error lists every problem found in a downstream or gates section.
type Error struct {
	// Problems are the problems found, at least one, ordered by line.
	Problems []Problem
}

// Error returns the problems, one per line, prefixed by "check: ".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("check: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(p.Error())
	}
	return b.String()
}

// Sections are the parts of a check file beside the policies: the
// downstream model and the gates, as written (zero fields unset).
type Sections struct {
	// Downstream is the downstream section's settings, each checked for
	// range, with zero fields where the section leaves them out
	// (Downstream.Resolve, which Run calls, fills in the defaults).
	Downstream Downstream
	// Gates is the gates section's limits, each checked for range, with
	// zero fields where the section leaves them out (a zero
	// MaxAmplification or MaxRecovery is then the default limit).
	Gates Gates
	// HasDownstream and HasGates say whether the sections were present.
	HasDownstream, HasGates bool
}

// PolicyFile is a policy file as check reads it.
type PolicyFile struct {
	// File is what config.Parse made of the policies, operations and
	// default: the same validation and messages as the service's loader.
	File *config.File
	// Sections are the downstream and gates sections found in the same
	// file, if any.
	Sections   Sections
	positions  map[string][2]int // each policy's name: line, column
	sectionsAt [2]int            // the first downstream or gates key
}

// Position returns the line and column of the policy's name in the file
// (under policies), or 0, 0.
func (pf *PolicyFile) Position(policy string) (line, col int) {
	p := pf.positions[policy]
	return p[0], p[1]
}

// positions returns where each policy's name and the first section key
// are in data.
func positions(data []byte) (map[string][2]int, [2]int) {
	out := map[string][2]int{}
	var at [2]int
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return out, at
	}
	doc := root.Content[0]
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		if contains(sectionKeys, k.Value) && at[0] == 0 {
			at = [2]int{k.Line, k.Column}
		}
		if k.Value == "policies" && v.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(v.Content); j += 2 {
				out[v.Content[j].Value] = [2]int{v.Content[j].Line, v.Content[j].Column}
			}
		}
	}
	return out, at
}

// maxFileSize bounds the files check reads.
const maxFileSize = 4 << 20

// LoadPolicyFile reads the policy file at path. See ParsePolicyFile.
func LoadPolicyFile(path string) (*PolicyFile, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePolicyFile(path, data)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("check: %s: cannot be read: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("check: %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("check: %s: larger than %d bytes", path, maxFileSize)
	}
	return data, nil
}

// ParsePolicyFile reads a policy file's content; name is used in messages.
//
// The policies, operations and default go to config.Parse, the loader the
// service uses, so its validation and line-numbered messages are exactly
// the service's. The service's loader refuses any other top-level key, so
// the top-level downstream and gates sections, if present, are taken out
// first: their lines are blanked, which keeps every line number of the
// rest as it is in the file. They are then decoded from the original
// bytes, unknown fields refused with their lines. (A file the service
// loads cannot hold these sections; keep them in a file of their own, see
// ParseSections.) Sections in a flow-style document ({...}, JSON) cannot
// be blanked line by line and are refused.
func ParsePolicyFile(name string, data []byte) (*PolicyFile, error) {
	if err := checkAliases(name, data); err != nil {
		return nil, err
	}
	rest, err := stripSections(name, data) // config.Parse refuses a second YAML document
	if err != nil {
		return nil, err
	}
	f, err := config.Parse(name, rest)
	if err != nil {
		return nil, explained(data, err)
	}
	out := &PolicyFile{File: f}
	out.positions, out.sectionsAt = positions(data)
	if !bytes.Equal(rest, data) {
		s, err := parseSections(name, data, true)
		if err != nil {
			return nil, explained(data, err)
		}
		out.Sections = s
	}
	return out, nil
}

// secondDocument reports a YAML document after the first in a downstream
// file, as config.Parse does in a policy file: the decoder reads only the
// first, so gates in a second one would be dropped without a word. An
// empty document (a trailing --- or ...) is no problem.
func secondDocument(name string, data []byte) (Problem, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first yaml.Node
	if err := dec.Decode(&first); err != nil {
		return Problem{}, false // empty or invalid: parseSections reports it
	}
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			return Problem{}, false
		}
		if err != nil {
			return syntaxProblem(name, err), true
		}
		if len(next.Content) == 0 {
			continue
		}
		c := next.Content[0]
		if c.Kind == yaml.ScalarNode && c.Tag == "!!null" && c.Value == "" {
			continue
		}
		return Problem{File: name, Line: c.Line, Column: c.Column,
			Msg: "a second YAML document: a downstream file holds one; merge them or split the file"}, true
	}
}

// sectionKeys are the top-level keys check reads itself.
var sectionKeys = []string{"downstream", "gates"}

// stripSections returns data with the lines of its top-level downstream
// and gates sections blanked. Content that does not parse as YAML is
// returned as it is, for config.Parse to report.
func stripSections(name string, data []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil || root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return data, nil
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return data, nil
	}
	type span struct{ from, to int } // 1-based lines, inclusive; to 0: to the end of the document
	var spans []span
	seen := map[string]bool{}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k := doc.Content[i]
		if !contains(sectionKeys, k.Value) {
			continue
		}
		if seen[k.Value] {
			return nil, &Error{[]Problem{{File: name, Line: k.Line, Column: k.Column, Path: k.Value, Msg: "appears twice"}}}
		}
		seen[k.Value] = true
		if doc.Style&yaml.FlowStyle != 0 {
			return nil, &Error{[]Problem{{File: name, Line: k.Line, Column: k.Column, Path: k.Value,
				Msg: "a downstream or gates section in a flow-style ({...} or JSON) policy file cannot be read beside the policies: write the file in block style, or put the section in a file of its own (--downstream)"}}}
		}
		s := span{from: k.Line}
		if i+2 < len(doc.Content) {
			s.to = doc.Content[i+2].Line - 1
		}
		spans = append(spans, s)
	}
	if len(spans) == 0 {
		return data, nil
	}
	lines := splitLines(data)
	blank := func(i int) { lines[i] = lines[i][len(bytes.TrimRight(lines[i], "\r\n\u0085\u2028\u2029")):] }
	for _, s := range spans {
		to := s.to
		if to == 0 {
			to = len(lines)
			for j := s.from; j < len(lines); j++ { // stop at the next document
				if bytes.HasPrefix(lines[j], []byte("---")) || bytes.HasPrefix(lines[j], []byte("...")) {
					to = j
					break
				}
			}
		}
		for j := s.from - 1; j < to && j < len(lines); j++ {
			blank(j)
		}
	}
	return bytes.Join(lines, nil), nil
}

// splitLines splits data after each line break as YAML counts them (CR
// LF, CR, LF, NEL, LS, PS), each line keeping its break.
func splitLines(data []byte) [][]byte {
	var out [][]byte
	start := 0
	for i := 0; i < len(data); {
		n := 0
		switch {
		case data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n':
			n = 2
		case data[i] == '\r' || data[i] == '\n':
			n = 1
		case bytes.HasPrefix(data[i:], []byte("\u0085")):
			n = 2
		case bytes.HasPrefix(data[i:], []byte("\u2028")), bytes.HasPrefix(data[i:], []byte("\u2029")):
			n = 3
		}
		if n == 0 {
			i++
			continue
		}
		i += n
		out = append(out, data[start:i])
		start = i
	}
	return append(out, data[start:])
}

// ParseSections reads a file of downstream and gates sections (the
// --downstream file): a YAML mapping with the keys downstream and gates,
// both optional, in the schema of README.md. Unknown fields, values of
// the wrong type and values out of range are reported with their lines,
// all at once, as an *Error.
func ParseSections(name string, data []byte) (Sections, error) {
	if len(data) > maxFileSize {
		return Sections{}, fmt.Errorf("check: %s: larger than %d bytes", name, maxFileSize)
	}
	if p, ok := secondDocument(name, data); ok {
		return Sections{}, &Error{[]Problem{explain(data, p)}}
	}
	if err := checkAliases(name, data); err != nil {
		return Sections{}, err
	}
	s, err := parseSections(name, data, false)
	if err != nil {
		return Sections{}, explained(data, err)
	}
	return s, nil
}

// The YAML forms of the sections. Decoded with KnownFields, so unknown
// keys are refused with their lines.
type sectionsYAML struct {
	Downstream *downstreamYAML `yaml:"downstream"`
	Gates      *gatesYAML      `yaml:"gates"`
}

// policyFileYAML is a whole policy file: the policies' keys are
// config.Parse's to check.
type policyFileYAML struct {
	Policies   yaml.Node       `yaml:"policies"`
	Operations yaml.Node       `yaml:"operations"`
	Default    yaml.Node       `yaml:"default"`
	Downstream *downstreamYAML `yaml:"downstream"`
	Gates      *gatesYAML      `yaml:"gates"`
}

type downstreamYAML struct {
	Clients  *int         `yaml:"clients"`
	Rate     *float64     `yaml:"rate"`
	Workers  *int         `yaml:"workers"`
	Capacity *float64     `yaml:"capacity"`
	Service  *distYAML    `yaml:"service"`
	Queue    *int         `yaml:"queue"`
	Latency  *distYAML    `yaml:"latency"`
	Timeout  *durYAML     `yaml:"timeout"`
	Degrade  *degradeYAML `yaml:"degrade"`
}

type degradeYAML struct {
	Knee  int     `yaml:"knee"`
	Slope float64 `yaml:"slope"`
	Max   float64 `yaml:"max"`
}

type gatesYAML struct {
	MaxAmplification *ampYAML              `yaml:"max_amplification"`
	MaxRecovery      *recoveryYAML         `yaml:"max_recovery"`
	MinSuccess       *float64              `yaml:"min_success"`
	Storms           map[string]*stormGate `yaml:"storms"`
}

type stormGate struct {
	MaxAmplification *ampYAML      `yaml:"max_amplification"`
	MaxRecovery      *recoveryYAML `yaml:"max_recovery"`
	MinSuccess       *float64      `yaml:"min_success"`
}

// yamlFields are the keys of each section type, for unknown-field
// messages.
var yamlFields = map[string]struct {
	path   string
	fields string
}{
	"sectionsYAML":   {"", "downstream, gates"},
	"policyFileYAML": {"", "default, downstream, gates, operations, policies"},
	"downstreamYAML": {"downstream", "capacity, clients, degrade, latency, queue, rate, service, timeout, workers"},
	"degradeYAML":    {"downstream.degrade", "knee, max, slope"},
	"gatesYAML":      {"gates", "max_amplification, max_recovery, min_success, storms"},
	"stormGate":      {"gates.storms", "max_amplification, max_recovery, min_success"},
}

// durYAML reads a Go duration ("250ms").
type durYAML time.Duration

func (d *durYAML) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return lineError(n, "must be a duration like 250ms or 1s")
	}
	if n.Value == "0" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return lineError(n, "%q is not a duration (use a number with a unit: 250ms, 2s, 1m)", n.Value)
	}
	*d = durYAML(v)
	return nil
}

// recoveryYAML is a duration or "none".
type recoveryYAML time.Duration

func (r *recoveryYAML) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "none" {
		*r = recoveryYAML(NoRecoveryLimit)
		return nil
	}
	var d durYAML
	if err := d.UnmarshalYAML(n); err != nil {
		return lineError(n, "must be a duration like 10s, or none")
	}
	if d < 0 {
		return lineError(n, "%q must not be negative (none: not gated)", n.Value)
	}
	if d == 0 {
		return lineError(n, "0 is not a limit: leave max_recovery out for the default (%s), or write none", DefaultMaxRecovery)
	}
	*r = recoveryYAML(d)
	return nil
}

// ampYAML is an amplification limit or "none".
type ampYAML float64

func (a *ampYAML) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "none" {
		*a = NoAmplificationLimit
		return nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return lineError(n, "must be a number of at least 1, or none")
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || !finite(v) {
		return lineError(n, "%q is not a number (a limit of at least 1, or none)", n.Value)
	}
	*a = ampYAML(v)
	return nil
}

// distYAML reads a sim.ParseDist distribution ("exp(10ms)", "20ms").
type distYAML sim.Dist

func (d *distYAML) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return lineError(n, "must be a duration (20ms) or a distribution such as exp(20ms), uniform(10ms,30ms), normal(20ms,5ms)")
	}
	v, err := sim.ParseDist(n.Value)
	if err != nil {
		return lineError(n, "%s", strings.TrimPrefix(err.Error(), "sim: invalid distribution: "))
	}
	*d = distYAML(v)
	return nil
}

// lineError is an error the YAML decoder collects with the others (it
// keeps decoding), carrying the node's line.
func lineError(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, fmt.Sprintf(format, args...))}}
}

var (
	reLine    = regexp.MustCompile(`^line (\d+): (.*)$`)
	reUnknown = regexp.MustCompile(`^field (\S+) not found in type \S*?\.?(\w+)$`)
	reType    = regexp.MustCompile(`^cannot unmarshal !!(\w+) ` + "`" + `(.*)` + "`" + ` into \S+$`)
)

// parseSections decodes the downstream and gates sections of data. In a
// policy file (policyFile) the policies' keys are accepted and left alone.
func parseSections(name string, data []byte, policyFile bool) (Sections, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Sections{}, &Error{[]Problem{syntaxProblem(name, err)}}
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return Sections{}, &Error{[]Problem{{File: name, Msg: "the file is empty: it needs a downstream or gates mapping"}}}
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		return Sections{}, &Error{[]Problem{{File: name, Line: doc.Line, Msg: "must be a mapping with downstream and gates keys"}}}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if k := doc.Content[i]; contains(sectionKeys, k.Value) {
			if seen[k.Value] {
				return Sections{}, &Error{[]Problem{{File: name, Line: k.Line, Column: k.Column, Path: k.Value, Msg: "appears twice"}}}
			}
			seen[k.Value] = true
		}
	}
	var s sectionsYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var err error
	if policyFile {
		var p policyFileYAML
		err = dec.Decode(&p)
		s = sectionsYAML{Downstream: p.Downstream, Gates: p.Gates}
	} else {
		err = dec.Decode(&s)
	}
	var problems []Problem
	if err != nil {
		problems = decodeProblems(name, &root, err)
	}
	out, more := s.build(name, &root)
	reported := map[string]bool{}
	for _, p := range problems {
		reported[p.Path] = true
	}
	for _, p := range more {
		if !reported[p.Path] { // a value the decoder refused is not judged again
			problems = append(problems, p)
		}
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Line < problems[j].Line })
	if len(problems) > 0 {
		return Sections{}, &Error{problems}
	}
	return out, nil
}

// decodeProblems turns the decoder's error into problems with lines and
// field paths.
func decodeProblems(name string, root *yaml.Node, err error) []Problem {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		if errors.Is(err, io.EOF) {
			return []Problem{{File: name, Msg: "the file is empty"}}
		}
		return []Problem{syntaxProblem(name, err)}
	}
	var out []Problem
	for _, e := range te.Errors {
		p := Problem{File: name, Msg: e}
		if m := reLine.FindStringSubmatch(e); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			p.Msg = m[2]
		}
		p.Path = pathAt(root, p.Line, "")
		if m := reUnknown.FindStringSubmatch(p.Msg); m != nil {
			if f, ok := yamlFields[m[2]]; ok {
				p.Msg = "unknown field (known: " + f.fields + ")"
				if p.Path = pathAt(root, p.Line, m[1]); p.Path == "" {
					p.Path = join(f.path, m[1])
				}
			}
		} else if m := reType.FindStringSubmatch(p.Msg); m != nil {
			p.Msg = fmt.Sprintf("%q is not %s", m[2], kindWanted(p.Path))
		}
		out = append(out, p)
	}
	return out
}

// kindWanted says what the field at path takes.
func kindWanted(path string) string {
	last := path[strings.LastIndexByte(path, '.')+1:]
	switch last {
	case "clients", "workers", "queue", "knee":
		return "a whole number"
	case "downstream", "gates", "degrade", "storms":
		return "a mapping"
	}
	if strings.HasPrefix(path, "gates.storms.") && strings.Count(path, ".") == 2 {
		return "a mapping"
	}
	return "a number"
}

// pathAt returns the dotted path of the key on line (named key, if
// given), or "".
func pathAt(root *yaml.Node, line int, key string) string {
	if line == 0 {
		return ""
	}
	var walk func(n *yaml.Node, path string) string
	walk = func(n *yaml.Node, path string) string {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if p := walk(c, path); p != "" {
					return p
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := join(path, k.Value)
				if deeper := walk(v, p); deeper != "" {
					return deeper
				}
				if key != "" {
					if k.Line == line && k.Value == key {
						return p
					}
				} else if k.Line == line || (v.Line == line && v.Kind == yaml.ScalarNode) {
					return p
				}
			}
		}
		return ""
	}
	return walk(root, "")
}

// build turns the decoded sections into values, checking ranges.
func (s *sectionsYAML) build(name string, root *yaml.Node) (Sections, []Problem) {
	var out Sections
	var problems []Problem
	bad := func(path, format string, args ...any) {
		p := Problem{File: name, Path: path, Msg: fmt.Sprintf(format, args...)}
		if n := nodeAt(root, path); n != nil {
			p.Line, p.Column = n.Line, n.Column
		}
		problems = append(problems, p)
	}
	if d := s.Downstream; d != nil {
		out.HasDownstream = true
		ds := &out.Downstream
		if d.Clients != nil {
			if ds.Clients = *d.Clients; ds.Clients < 1 || ds.Clients > 100_000 {
				bad("downstream.clients", "%d is outside [1, 100000]", ds.Clients)
			}
		}
		if d.Rate != nil {
			if ds.Rate = *d.Rate; !finite(ds.Rate) || ds.Rate <= 0 || ds.Rate > 1e6 {
				bad("downstream.rate", "%g is outside (0, 1e6] calls/s", ds.Rate)
			}
		}
		if d.Workers != nil {
			if ds.Workers = *d.Workers; ds.Workers < 1 || ds.Workers > 1_000_000 {
				bad("downstream.workers", "%d is outside [1, 1000000]", ds.Workers)
			}
		}
		if d.Capacity != nil {
			if ds.Capacity = *d.Capacity; !finite(ds.Capacity) || ds.Capacity <= 0 || ds.Capacity > 1e6 {
				bad("downstream.capacity", "%g is outside (0, 1e6] requests/s", ds.Capacity)
			}
		}
		if d.Workers != nil && d.Capacity != nil {
			bad("downstream.capacity", "set workers or capacity, not both (capacity = workers / mean service time)")
		}
		if d.Service != nil {
			if ds.Service = sim.Dist(*d.Service); ds.Service.Mean() <= 0 || ds.Service.Mean() > time.Minute {
				bad("downstream.service", "%s must have a mean in (0, 1m]", ds.Service)
			}
		}
		if d.Queue != nil {
			if ds.Queue = *d.Queue; ds.Queue < -1 || ds.Queue == 0 || ds.Queue > 10_000_000 {
				bad("downstream.queue", "%d is outside [1, 10000000] (-1: no queue; leave it out for two seconds of work)", ds.Queue)
			}
		}
		if d.Latency != nil {
			if ds.Latency = sim.Dist(*d.Latency); ds.Latency.Mean() > time.Minute {
				bad("downstream.latency", "%s must have a mean of at most 1m", ds.Latency)
			}
			if ds.Latency == (sim.Dist{}) {
				bad("downstream.latency", "0 is not a latency the model takes: give it at least 1µs")
			}
		}
		if d.Timeout != nil {
			if ds.Timeout = time.Duration(*d.Timeout); ds.Timeout <= 0 || ds.Timeout > time.Hour {
				bad("downstream.timeout", "%s is outside (0, 1h]", ds.Timeout)
			}
		}
		if g := d.Degrade; g != nil {
			ds.Degrade = sim.Degrade{Knee: g.Knee, Slope: g.Slope, MaxFactor: g.Max}
			if g.Knee < 0 || !finite(g.Slope) || g.Slope < 0 || !finite(g.Max) || g.Max < 0 || g.Max > 1000 {
				bad("downstream.degrade", "knee, slope and max must not be negative (max at most 1000)")
			}
		}
	}
	if g := s.Gates; g != nil {
		out.HasGates = true
		gate := func(path string, amp *ampYAML, rec *recoveryYAML, succ *float64) Gates {
			var out Gates
			if amp != nil {
				if out.MaxAmplification = float64(*amp); out.MaxAmplification != NoAmplificationLimit && (out.MaxAmplification < 1 || out.MaxAmplification > 1e6) {
					bad(path+"max_amplification", "%g must be at least 1 (the baseline load itself), or none", out.MaxAmplification)
				}
			}
			if rec != nil {
				out.MaxRecovery = time.Duration(*rec)
			}
			if succ != nil {
				if out.MinSuccess = *succ; !finite(*succ) || *succ <= 0 || *succ > 1 {
					bad(path+"min_success", "%g must be a share in (0, 1] (0.95 is 95%%)", *succ)
				}
			}
			return out
		}
		out.Gates = gate("gates.", g.MaxAmplification, g.MaxRecovery, g.MinSuccess)
		for _, storm := range sortedKeys(g.Storms) {
			sg := g.Storms[storm]
			path := "gates.storms." + storm
			if _, err := pickStorms([]string{storm}); err != nil || storm == "" {
				bad(path, "not a storm (storms: %s)", strings.Join(StormNames(), ", "))
				continue
			}
			if sg == nil {
				bad(path, "must be a mapping of max_amplification, max_recovery, min_success")
				continue
			}
			if out.Gates.Storms == nil {
				out.Gates.Storms = map[string]Gates{}
			}
			out.Gates.Storms[storm] = gate(path+".", sg.MaxAmplification, sg.MaxRecovery, sg.MinSuccess)
		}
	}
	return out, problems
}

// nodeAt returns the key node at the dotted path, or nil.
func nodeAt(root *yaml.Node, path string) *yaml.Node {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	parts := strings.Split(path, ".")
	var key *yaml.Node
	for _, part := range parts {
		if n == nil || n.Kind != yaml.MappingNode {
			return key
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				key, next = n.Content[i], n.Content[i+1]
			}
		}
		if next == nil {
			return key
		}
		n = next
	}
	return key
}

// syntaxProblem turns a YAML parser error ("yaml: line 3: ...") into a
// Problem with the line in its place.
func syntaxProblem(file string, err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	p := Problem{File: file, Msg: msg}
	if m := reLine.FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		p.Msg = m[2]
	}
	return p
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
