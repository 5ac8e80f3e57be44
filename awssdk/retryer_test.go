package awssdk_test

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// maxJitter draws the top of every full-jitter range, so that the
// stormguard waits are the ceilings the SDK's random draws stay under.
type maxJitter struct{}

func (maxJitter) Uint64() uint64 { return math.MaxUint64 }

// reply is one scripted answer of the DynamoDB endpoint.
type reply struct {
	status     int
	errType    string // the DynamoDB error type, "" for a success
	retryAfter string // x-amz-retry-after, "" for none
	skewed     bool   // a Date header an hour ahead (clock skew)
	drop       bool   // no answer: the connection is closed (a transport error)
}

var (
	ok200      = reply{status: 200}
	throttling = reply{status: 400, errType: "ThrottlingException"}
	provision  = reply{status: 400, errType: "ProvisionedThroughputExceededException"}
	internal   = reply{status: 500, errType: "InternalServerError"}
)

func advised(r reply, ms string) reply { r.retryAfter = ms; return r }

// endpoint is a loopback DynamoDB that answers from a script, one reply
// per request, and counts the requests.
type endpoint struct {
	mu       sync.Mutex
	script   []reply
	requests int
	srv      *httptest.Server
	// hook, when set, is called with the request's number (1 for the
	// first of the call) before it is answered.
	hook func(request int)
}

func newEndpoint(t *testing.T) *endpoint {
	e := &endpoint{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.requests++
		rep := ok200
		if len(e.script) > 0 {
			rep, e.script = e.script[0], e.script[1:]
		}
		hook, n := e.hook, e.requests
		e.mu.Unlock()
		if hook != nil {
			hook(n)
		}
		if rep.drop {
			_, _ = io.Copy(io.Discard, r.Body) // so that the client sees EOF, always
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if rep.retryAfter != "" {
			w.Header().Set("x-amz-retry-after", rep.retryAfter)
		}
		if rep.skewed {
			w.Header().Set("Date", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
		}
		body := `{}`
		if rep.errType != "" {
			body = fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"scripted"}`, rep.errType)
		}
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
		w.WriteHeader(rep.status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// play sets the script of the next call and returns how many requests the
// call made.
func (e *endpoint) play(script []reply, call func()) int {
	e.mu.Lock()
	e.script, e.requests = append([]reply(nil), script...), 0
	e.mu.Unlock()
	call()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests
}

// sleepless wraps a retryer: it records what RetryDelay returns, advances
// the fake clock by the wait the SDK's Retry middleware would sleep (the
// delay, with an x-amz-retry-after advice clamped to [delay, delay + 5 s])
// and hands the SDK −5 s instead, which the middleware's clamp turns into
// no sleep at all (it clamps any advice to [−5 s, 0]), so the test never
// sleeps.
type sleepless struct {
	aws.RetryerV2
	clk    *clocktest.Fake
	delays []time.Duration
	waits  []time.Duration
}

func (s *sleepless) RetryDelay(attempt int, err error) (time.Duration, error) {
	d, derr := s.RetryerV2.RetryDelay(attempt, err)
	if derr != nil {
		return d, derr
	}
	w := d
	if advice, ok := retryAfterOf(err); ok {
		w = min(max(advice, d), d+5*time.Second)
	}
	s.delays, s.waits = append(s.delays, d), append(s.waits, w)
	s.clk.Advance(w)
	return -5 * time.Second, nil
}

// retryAfterOf reads x-amz-retry-after as the SDK's Retry middleware
// does: a decimal number of milliseconds >= 0 on the HTTP response error.
func retryAfterOf(err error) (time.Duration, bool) {
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return 0, false
	}
	v, perr := strconv.ParseInt(re.Response.Header.Get("X-Amz-Retry-After"), 10, 64)
	if perr != nil || v < 0 {
		return 0, false
	}
	return time.Duration(v) * time.Millisecond, true
}

// client makes a DynamoDB client on cfg's retryer, aimed at the endpoint.
func (e *endpoint) client(t *testing.T, opts ...func(*config.LoadOptions) error) *dynamodb.Client {
	t.Helper()
	opts = append([]func(*config.LoadOptions) error{
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")),
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
	}, opts...)
	cfg, err := config.LoadDefaultConfig(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(e.srv.URL)
	})
}

func getItem(c *dynamodb.Client) error {
	_, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String("t"),
		Key:       map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}},
	})
	return err
}

// step is one call of the comparison script.
type step struct {
	name   string
	script []reply
	// attempts the call makes, and whether it fails.
	attempts int
	fails    bool
	// The stormguard retryer's delays (its jitter drawn at the top): the
	// SDK's standard retryer draws each below the same ceiling.
	delays []time.Duration
	// The waits the SDK sleeps (x-amz-retry-after applied).
	waits []time.Duration
	quota uint // the retry quota after the call
}

const ms = time.Millisecond

// script is DynamoDB under the 2026 rules: 4 attempts, a 25 ms base
// (1 s after a throttle), 500 tokens, 14 per retry, 5 after a throttle,
// a successful retry refunded, a successful first attempt +1.
func script() []step {
	s := []step{
		{"throttled twice", []reply{throttling, throttling, ok200}, 3, false, []time.Duration{time.Second, 2 * time.Second}, nil, 495},
		{"provisioned throughput exhausts the attempts", []reply{provision, provision, provision, provision}, 4, true,
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, nil, 480},
		{"a 500 then success", []reply{internal, ok200}, 2, false, []time.Duration{25 * ms}, nil, 480},
		{"x-amz-retry-after raises the wait", []reply{advised(internal, "1500"), ok200}, 2, false, []time.Duration{25 * ms}, []time.Duration{1500 * ms}, 480},
		// Within Policy.MaxRetryAfter (30 s): an advice beyond it is not
		// retried (TestRetryAfterBeyondMaxRetryAfterStops), where the SDK
		// comes back after the backoff + 5 s.
		{"x-amz-retry-after is clamped to the backoff + 5 s", []reply{advised(throttling, "20000"), ok200}, 2, false, []time.Duration{time.Second}, []time.Duration{6 * time.Second}, 480},
		{"x-amz-retry-after below the backoff is ignored", []reply{internal, advised(internal, "1"), ok200}, 3, false, []time.Duration{25 * ms, 50 * ms}, nil, 466},
		{"a first attempt that succeeds pays in", []reply{ok200}, 1, false, nil, nil, 467},
	}
	// Drain the quota with 500s: each call pays 3 retries of 14.
	q := uint(467)
	for i := 0; q >= 42; i++ {
		q -= 42
		s = append(s, step{fmt.Sprintf("500s drain the quota %d", i), []reply{internal, internal, internal, internal}, 4, true,
			[]time.Duration{25 * ms, 50 * ms, 100 * ms}, nil, q})
	}
	// 467 − 11·42 = 5: no retry of 14 can be paid.
	s = append(s, step{"the quota refuses the retry", []reply{internal, ok200}, 1, true, nil, nil, q})
	return s
}

// TestRetryerMatchesTheSDKStandardRetryer runs the same script through a
// real aws-sdk-go-v2 DynamoDB client twice, on a loopback endpoint: once
// with the SDK's own standard retryer (retry.NewStandard, as DynamoDB's
// client configures it: 4 attempts, 25 ms base), once with
// awssdk.Provider(awsretry.Rules{DynamoDB: true}.Policy()) through
// config.WithRetryer. Attempts, delays (under the same ceilings), waits on
// the fake clock and the quota after each call must agree.
func TestRetryerMatchesTheSDKStandardRetryer(t *testing.T) {
	e := newEndpoint(t)

	sdkQuota := ratelimit.NewTokenRateLimit(sdkretry.DefaultRetryRateTokens)
	sdkClk := clocktest.NewFake()
	sdkSide := &sleepless{clk: sdkClk, RetryerV2: sdkretry.NewStandard(func(o *sdkretry.StandardOptions) {
		o.MaxAttempts = 4
		o.BaseDelay = 25 * time.Millisecond
		o.RateLimiter = sdkQuota
	})}
	sdkClient := e.client(t, config.WithRetryer(func() aws.Retryer { return sdkSide }))

	policy := awsretry.Rules{DynamoDB: true, Rand: maxJitter{}}.Policy()
	quota := policy.Budget.(*budget.Ratio)
	sgClk := clocktest.NewFake()
	sgSide := &sleepless{clk: sgClk}
	provider := awssdk.Provider(policy)
	sgSide.RetryerV2 = provider().(aws.RetryerV2)
	sgClient := e.client(t, config.WithRetryer(func() aws.Retryer { return sgSide }))

	for _, st := range script() {
		sdkSide.delays, sdkSide.waits, sgSide.delays, sgSide.waits = nil, nil, nil, nil
		var sdkErr, sgErr error
		sdkAttempts := e.play(st.script, func() { sdkErr = getItem(sdkClient) })
		sgAttempts := e.play(st.script, func() { sgErr = getItem(sgClient) })

		if sdkAttempts != st.attempts || sgAttempts != st.attempts {
			t.Errorf("%s: attempts: SDK %d, stormguard %d, want %d", st.name, sdkAttempts, sgAttempts, st.attempts)
		}
		if (sdkErr != nil) != st.fails || (sgErr != nil) != st.fails {
			t.Errorf("%s: errors: SDK %v, stormguard %v, want failure %v", st.name, sdkErr, sgErr, st.fails)
		}
		if got := sdkQuota.Remaining(); got != st.quota {
			t.Errorf("%s: the SDK's quota is %d, want %d", st.name, got, st.quota)
		}
		if got := quota.Available(); got != float64(st.quota) {
			t.Errorf("%s: stormguard's quota is %v, want %d", st.name, got, st.quota)
		}
		if fmt.Sprint(sgSide.delays) != fmt.Sprint(st.delays) {
			t.Errorf("%s: stormguard's delays %v, want %v", st.name, sgSide.delays, st.delays)
		}
		if len(sdkSide.delays) != len(st.delays) {
			t.Errorf("%s: the SDK's delays %v, want %d under %v", st.name, sdkSide.delays, len(st.delays), st.delays)
		} else {
			for i, d := range sdkSide.delays {
				if d < 0 || d > st.delays[i] {
					t.Errorf("%s: the SDK's delay %d is %v, outside [0, %v]", st.name, i+1, d, st.delays[i])
				}
			}
		}
		waits := st.waits
		if waits == nil {
			waits = st.delays
		}
		if fmt.Sprint(sgSide.waits) != fmt.Sprint(waits) {
			t.Errorf("%s: stormguard's waits %v, want %v", st.name, sgSide.waits, waits)
		}
		for i, w := range sdkSide.waits {
			if i < len(st.waits) && st.waits[i] > st.delays[i] && w < st.waits[i]-st.delays[i] {
				t.Errorf("%s: the SDK's wait %d is %v, below the advice", st.name, i+1, w)
			}
		}
		if strings.Contains(st.name, "refuses") {
			if !errors.Is(sgErr, retry.ErrBudgetExhausted) || !errors.Is(sgErr, awssdk.ErrBudgetExhausted) {
				t.Errorf("%s: stormguard's error %v does not match ErrBudgetExhausted", st.name, sgErr)
			}
			var qe ratelimit.QuotaExceededError
			if !errors.As(sdkErr, &qe) {
				t.Errorf("%s: the SDK's error %v is no QuotaExceededError", st.name, sdkErr)
			}
		}
	}
	var total time.Duration
	for _, st := range script() {
		ws := st.waits
		if ws == nil {
			ws = st.delays
		}
		for _, w := range ws {
			total += w
		}
	}
	if got := sgClk.Since(clocktest.Epoch); got != total {
		t.Errorf("the fake clock moved %v, want the waits' sum %v", got, total)
	}
}

// TestRetryerBreakerAndObserver: the Policy's breaker opens after the
// failures of one call and the next call fails without a request, with
// breaker.ErrOpen; the Observer hears each attempt (first or retry) and
// each scheduled retry, with the wait the SDK sleeps.
func TestRetryerBreakerAndObserver(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Breaker = breaker.New(breaker.Config{ConsecutiveFailures: 3, Clock: clk})
	policy.Observer = obs
	policy.Operation = "ddb"
	side := &sleepless{clk: clk, RetryerV2: awssdk.NewRetryer(policy)}
	c := e.client(t, config.WithRetryer(func() aws.Retryer { return side }))

	n := e.play([]reply{internal, advised(internal, "700"), internal}, func() {
		if err := getItem(c); err == nil {
			t.Error("the call succeeded")
		}
	})
	if n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	n = e.play([]reply{ok200}, func() {
		if err := getItem(c); !errors.Is(err, breaker.ErrOpen) {
			t.Errorf("with the breaker open: %v, want breaker.ErrOpen", err)
		}
	})
	if n != 0 {
		t.Fatalf("the open breaker let %d requests through", n)
	}
	want := "start 1; end 1 error; retry 2 after 50ms; start 2; end 2 error; retry 3 after 700ms; start 2; end 2 error; "
	if got := obs.String(); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}

// events records Observer events as text.
type events struct {
	mu sync.Mutex
	b  strings.Builder
}

func (o *events) String() string { o.mu.Lock(); defer o.mu.Unlock(); return o.b.String() }

func (o *events) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(&o.b, "start %d; ", e.Attempt)
	if e.Operation != "ddb" {
		fmt.Fprintf(&o.b, "operation %q; ", e.Operation)
	}
	return ctx
}

func (o *events) AttemptEnd(_ context.Context, e retry.AttemptEnd) {
	o.mu.Lock()
	defer o.mu.Unlock()
	res := "ok"
	switch e.Outcome {
	case retry.OutcomeError:
		res = "error"
	case retry.OutcomeTimeout:
		res = "timeout"
	}
	fmt.Fprintf(&o.b, "end %d %s; ", e.Attempt, res)
}

func (o *events) RetryScheduled(_ context.Context, e retry.RetryScheduled) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(&o.b, "retry %d after %v; ", e.Attempt, e.Delay)
}

func (o *events) CallEnd(_ context.Context, e retry.CallEnd) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(&o.b, "call end %d %s; ", e.Attempts, e.Reason)
}

// TestRetryerBudgetSharedByClients: two DynamoDB clients made from one
// aws.Config share the Policy's budget: retries of either draw on it.
func TestRetryerBudgetSharedByClients(t *testing.T) {
	e := newEndpoint(t)
	policy := awsretry.Rules{DynamoDB: true, Rand: maxJitter{}}.Policy()
	quota := policy.Budget.(*budget.Ratio)
	clk := clocktest.NewFake()
	side := &sleepless{clk: clk, RetryerV2: awssdk.NewRetryer(policy)}
	opt := config.WithRetryer(func() aws.Retryer { return side })
	a, b := e.client(t, opt), e.client(t, opt)
	for _, c := range []*dynamodb.Client{a, b} {
		if n := e.play([]reply{internal, internal, internal, internal}, func() { _ = getItem(c) }); n != 4 {
			t.Fatalf("%d attempts, want 4", n)
		}
	}
	if got := quota.Available(); got != 500-6*14 {
		t.Fatalf("the shared quota is %v, want %v", got, 500-6*14)
	}
}

// panicObserver panics at the end of every attempt.
type panicObserver struct{ retry.NopObserver }

func (panicObserver) AttemptEnd(context.Context, retry.AttemptEnd) { panic("observer") }

// TestRetryerObserverPanicStillReportsTheAttempt: when the Observer panics
// as an attempt ends, the breaker and the budget still hear the attempt,
// and the panic goes on to the caller.
func TestRetryerObserverPanicStillReportsTheAttempt(t *testing.T) {
	policy := awsretry.Rules{}.Policy()
	quota := budget.NewRatio(budget.RatioConfig{MaxTokens: 10, InitialTokens: 5, Refill: 1})
	policy.Budget = quota
	brk := breaker.New(breaker.Config{ConsecutiveFailures: 1, Clock: clocktest.NewFake()})
	policy.Breaker = brk
	policy.Observer = panicObserver{}
	r := awssdk.NewRetryer(policy)
	release, err := r.GetAttemptToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() != "observer" {
				t.Error("the Observer's panic did not go on")
			}
		}()
		_ = release(errors.New("boom"))
	}()
	if brk.Ready() == nil {
		t.Error("the breaker did not hear the failed attempt")
	}
	_ = release(nil) // a second release does nothing
	r2 := awssdk.NewRetryer(&retry.Policy{Budget: quota, Observer: panicObserver{}})
	release, _ = r2.GetAttemptToken(context.Background())
	func() {
		defer func() { _ = recover() }()
		_ = release(nil)
	}()
	if got := quota.Available(); got != 6 {
		t.Errorf("the budget did not hear the successful first attempt: %v, want 6", got)
	}
}
