package sim

// ModelVersion identifies the lab's models and metric definitions. It is
// raised whenever a change to a built-in model, to the simulator's
// mechanics or to a metric's definition changes the numbers a seed gives,
// so that two JSON reports with the same seed and the same ModelVersion
// are comparable figure by figure, and two with different versions are
// not. Every Report carries it.
//
// History: 1, the models before the fidelity work of issue 19; 2, the
// published aws-occ schedule and retry-budget models, the cascade's total
// failure and SRE cases, the paper's metastable example, the retry-budget
// client sweep, response loss and the gateway's report queue; 3 (issue
// 33), peak× over one baseline per case (the reference run of each
// trial), 95% intervals from Student's t, hedging as hedge.Hedger does it
// (a timer per round, the layer rule, losers cancelled), the AWS adaptive
// limiter's reserved waits, and "stuck" only after the recovery tolerance
// + 10s of traffic after the fault.
const ModelVersion = 3

// Report is the result of running one scenario: raw numbers per case and
// policy (encoded by encoding/json deterministically: the same seed gives
// the same bytes), plus ready-made tables and plots for humans.
type Report struct {
	// Scenario is the name of the scenario run (Scenario.Name).
	Scenario string `json:"scenario"`
	// ModelVersion is the ModelVersion of the code that produced the
	// report.
	ModelVersion int `json:"model_version"`
	// Title is the report's one-line title: the scenario's Title unless
	// the run made its own (ModelSpec.TitleFor).
	Title string `json:"title"`
	// Description is the scenario's Doc, after a note of what the run
	// changed in the model when Options did.
	Description string `json:"description"`
	// Seed is the seed of the run (Options.Seed; 0 is a seed like any
	// other).
	Seed uint64 `json:"seed"`
	// Trials is the number of trials asked for per case and policy
	// (Options.Trials, or the scenario's default).
	Trials int `json:"trials"`
	// Events is the number of simulated events the report took.
	Events uint64 `json:"events"`
	// Partial is set when the run was cancelled: the figures come from
	// the trials that finished, TrialsDone of them.
	Partial    bool `json:"partial,omitempty"`
	TrialsDone int  `json:"trials_done,omitempty"`
	// Cases are the scenario's cases, in order, each with a row per
	// policy.
	Cases []Case `json:"cases"`
	// Verdict sums up the numbers in a few sentences, one per case (or
	// one per sweep), generated from them (see JudgeCase).
	Verdict []string `json:"verdict,omitempty"`
	// Tables and Plots present the cases, and PolicyLegend defines each
	// policy compared; they are not part of the JSON.
	Tables       []Table     `json:"-"`
	Plots        []Plot      `json:"-"`
	PolicyLegend [][2]string `json:"-"`
}

// Case is one setting of a scenario (one client count of a sweep, one
// failure probability, or the scenario's single setting) with one row per
// policy.
type Case struct {
	// Name names the case in tables and verdicts ("clients=800"; "" for
	// the case of a model scenario without Cases).
	Name string `json:"name"`
	// Fault window of the case in seconds, when it has one.
	FaultStartS float64 `json:"fault_start_s,omitempty"`
	FaultEndS   float64 `json:"fault_end_s,omitempty"`
	// CapacityPerS is the measured tier's nominal capacity in requests per
	// second (workers ÷ mean service time), when it is bounded.
	CapacityPerS float64 `json:"capacity_per_s,omitempty"`
	// AmpNoiseFloor is the peak× of the same workload with no fault and
	// no retries (the case's reference runs, one per trial, with the
	// trials' seeds; their mean): what Poisson noise alone reads as
	// amplification. Differences of peak× below it are noise.
	AmpNoiseFloor float64 `json:"amp_noise_floor,omitempty"`
	// TrafficEndS is when the clients stopped starting calls (Duration),
	// in seconds: the charts mark it.
	TrafficEndS float64 `json:"traffic_end_s,omitempty"`
	// Rows are the case's results, one per policy, in the order the
	// policies were given.
	Rows []Row `json:"rows"`
	// tail makes the case's verdict compare p99.9 (ModelSpec.TailVerdict).
	tail bool
	// capX and capY are the measured tier's capacity over time, a step
	// function (see Plot.HLineX), when a capacity fault changes it.
	capX, capY []float64
}

// Row is one policy's result in a case. Model scenarios fill Metrics (the
// mean over the trials) and Series (the first finished trial's, for the
// charts); the OCC scenario fills OCC.
type Row struct {
	// Policy names the contender, as the run was given it: a client
	// policy, or the server control of the overload scenario.
	Policy string `json:"policy"`
	// NotRun is set for a policy of a cancelled run without a finished
	// trial: it has no Metrics, and tables show "not run".
	NotRun bool `json:"not_run,omitempty"`
	// Metrics are the row's figures, the mean over its finished trials
	// in a model scenario; nil for a row not run and in the OCC and
	// hosts scenarios.
	Metrics *Metrics `json:"metrics,omitempty"`
	// OCC is the OCC scenario's figures; nil in the others.
	OCC *OCCStats `json:"occ,omitempty"`
	// Series is the load over time of the row's first finished trial;
	// nil where Metrics is.
	Series *Series `json:"series,omitempty"`
	// trials are the series of every finished trial (Series is the
	// first's), for the notes computed from all of them.
	trials []Series
}

// OCCStats summarises the trials of the OCC model for one policy.
type OCCStats struct {
	// Clients is the case's number of clients (OCC.Clients).
	Clients int `json:"clients"`
	// Trials is the number of trials the figures summarise.
	Trials int `json:"trials"`
	// MeanCalls is the mean number of server writes until every client
	// succeeded; CallsPerClient is MeanCalls / Clients.
	MeanCalls      float64 `json:"mean_calls"`
	CallsPerClient float64 `json:"calls_per_client"`
	// MeanCompletionMS is the mean time at which the last client
	// succeeded; P95CompletionMS its 95th percentile over trials.
	MeanCompletionMS float64 `json:"mean_completion_ms"`
	P95CompletionMS  float64 `json:"p95_completion_ms"`
	// CallsSE and CompletionSEMS are the standard errors of MeanCalls and
	// MeanCompletionMS (sample standard deviation over √Trials): two means
	// a few standard errors apart differ by more than sampling noise.
	CallsSE        float64 `json:"calls_se"`
	CompletionSEMS float64 `json:"completion_se_ms"`
	// Unfinished counts trials stopped by the time limit.
	Unfinished int `json:"unfinished"`
}

// Plot is a line chart's data; the stormsim command draws it.
type Plot struct {
	// Title heads the chart.
	Title string
	// XLabel and YLabel name the axes, with their units ("time (s)",
	// "attempts/s").
	XLabel, YLabel string
	// Lines are the series drawn, a line each.
	Lines []Line
	// Shade marks [ShadeFrom, ShadeTo) on the x axis (a fault window) when
	// ShadeTo > ShadeFrom.
	ShadeFrom, ShadeTo float64
	// HLine draws a horizontal reference line (a capacity) when > 0,
	// labelled HLineLabel.
	HLine      float64
	HLineLabel string
	// HLineX and HLineY, when set (of equal length), make the reference
	// line a step function instead: HLineY[i] from x = HLineX[i] to
	// HLineX[i+1] (the last to the end of the axis). A capacity fault
	// lowers the capacity line for its window; HLine is then HLineY[0],
	// for a chart that draws only a constant line.
	HLineX, HLineY []float64
	// Group heads a run of related plots ("Load over time"); "" for none.
	Group string
	// Marks are vertical lines at points of the x axis, each labelled
	// (retry waves, the end of traffic).
	Marks []Mark
}

// Mark is a labelled vertical line of a Plot at X.
type Mark struct {
	// X is where the line stands, in the x axis's unit.
	X float64
	// Label is written by the line ("end of traffic", "wave +1.5s").
	Label string
}

// Line is one named series of a Plot.
type Line struct {
	// Name labels the series in the chart's legend (a policy's name, or
	// what the series counts: "retries").
	Name string
	// X and Y are the series' points, (X[i], Y[i]): of equal length,
	// in the order they are joined.
	X, Y []float64
}
