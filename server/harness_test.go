package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/nodetest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// testToken is the bearer token of the test servers.
const testToken = "test-token-5f2c1e"

// api is one test's Sluice: a server with the token, an engine with the scripted test
// component, an in-process worker serving the library, on one Redis.
type api struct {
	t       *testing.T
	r       *store.Redis
	lib     *store.Library
	e       *engine.Engine
	metrics *server.Metrics
	srv     *server.Server
	base    string
	token   string
	logs    *syncBuffer // everything the engine and the server logged
	teams   *store.Teams
	sync    *engine.LibrarySync

	flowsMu sync.Mutex
	flows   []string // whose keys go once the server and its worker have stopped
}

// forgetFlow deletes flow's keys when the test ends, after the server and its worker
// have stopped: a worker still running recreates its node streams' groups.
func (a *api) forgetFlow(flow string) {
	a.flowsMu.Lock()
	defer a.flowsMu.Unlock()
	a.flows = append(a.flows, flow)
}

// syncBuffer is a bytes.Buffer for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type apiOption func(*server.Config, *server.Deps)

func newAPI(t *testing.T, r *store.Redis, opts ...apiOption) *api {
	t.Helper()
	return newAPIWith(t, r, nil, opts...)
}

// newAPIWith is newAPI with the built-in components made with env (nil: the defaults).
func newAPIWith(t *testing.T, r *store.Redis, env *nodes.Env, opts ...apiOption) *api {
	t.Helper()
	a := &api{t: t, r: r, lib: newLibrary(t), metrics: server.NewMetrics(), token: testToken, logs: &syncBuffer{}}
	// Registered first, so it runs last: after the server and the worker stopped.
	t.Cleanup(func() {
		a.flowsMu.Lock()
		defer a.flowsMu.Unlock()
		for _, f := range a.flows {
			storetest.DeleteFlowKeys(t, r, f)
		}
	})
	log := slog.New(slog.NewTextHandler(a.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if env == nil {
		env = &nodes.Env{}
	}
	reg := nodes.NewRegistry(env)
	reg.Register(nodetest.ScriptSpec(r.Client))
	reg.Register(hookOutputSpec())
	a.e = engine.New(r, reg, engine.Options{Logger: log, Observer: a.metrics})
	w := a.e.NewWorker(engine.WorkerOptions{Block: 200 * time.Millisecond, Grace: 2 * time.Second, Refresh: 200 * time.Millisecond})
	sync := a.e.NewLibrarySync(a.lib, w)
	cfg := server.Config{Addr: "127.0.0.1:0", Embedded: r.Embedded(), ShutdownTimeout: 5 * time.Second, Token: testToken,
		AuthFailures: 1000, Logger: log, HookSecret: func(string) string { return "" }}
	deps := server.Deps{Redis: r, Library: a.lib, Engine: a.e, Sync: sync, Metrics: a.metrics, Teams: newTeams(t, r)}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	a.token = cfg.Token
	a.teams = deps.Teams
	// The components apply the workspaces' secrets and providers of this test's team
	// store, as serve wires them (docs/teams.md).
	if env.Workspaces == nil {
		rules := deps.Teams.Rules(time.Second)
		env.Workspaces = rules
		if deps.Rules == nil {
			deps.Rules = rules
		}
	}
	a.sync = sync
	a.srv = server.New(cfg, deps)

	ctx, cancel := context.WithCancel(context.Background())
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(ctx) }()
	addrc := make(chan net.Addr, 1)
	sdone := make(chan error, 1)
	go func() { sdone <- a.srv.Run(ctx, func(ad net.Addr) { addrc <- ad }) }()
	select {
	case ad := <-addrc:
		a.base = "http://" + ad.String()
	case err := <-sdone:
		t.Fatalf("server did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		for _, c := range []chan error{sdone, wdone} {
			select {
			case <-c:
			case <-time.After(15 * time.Second):
				t.Error("server or worker did not stop within 15s")
			}
		}
	})
	return a
}

// res is an answer of the server.
type res struct {
	status int
	header http.Header
	body   []byte
}

func (r res) String() string { return string(r.body) }

// into decodes the body into v.
func (r res) into(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body is not the JSON expected (%v): %s", err, r.body)
	}
}

// errorBody decodes the error shape.
func (r res) errorBody(t *testing.T) server.ErrorDetail {
	t.Helper()
	var e server.ErrorBody
	r.into(t, &e)
	return e.Error
}

// do sends a request with the token. body may be nil, a []byte/string (sent as JSON), or
// any value (marshalled). header pairs override or add headers ("Authorization", "" drops
// the token).
func (a *api) do(method, path string, body any, header ...string) res {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if rd != nil || (method != "GET" && method != "HEAD") {
		req.Header.Set("Content-Type", "application/json") // an API client: every change is a JSON request
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return res{status: resp.StatusCode, header: resp.Header, body: b}
}

// must sends a request and fails the test unless the status is want.
func (a *api) must(want int, method, path string, body any, header ...string) res {
	a.t.Helper()
	r := a.do(method, path, body, header...)
	if r.status != want {
		a.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.status, want, r.body)
	}
	return r
}

// flowDoc returns an example (or a document given as JSON) with a flow id of its own,
// whose keys are deleted when the test ends.
func (a *api) flowDoc(exampleOrJSON string, edit func(map[string]any)) (string, []byte) {
	a.t.Helper()
	b := []byte(exampleOrJSON)
	if !strings.HasPrefix(strings.TrimSpace(exampleOrJSON), "{") {
		var err error
		if b, err = examples.Read(exampleOrJSON); err != nil {
			a.t.Fatal(err)
		}
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		a.t.Fatal(err)
	}
	id := storetest.FlowID(a.t)
	d["id"] = id
	if edit != nil {
		edit(d)
	}
	a.forgetFlow(id)
	b, _ = json.MarshalIndent(d, "", "  ")
	return id, b
}

// saveFlow saves a flow through the API and returns its id.
func (a *api) saveFlow(exampleOrJSON string, edit func(map[string]any)) string {
	a.t.Helper()
	id, doc := a.flowDoc(exampleOrJSON, edit)
	a.must(http.StatusCreated, "PUT", "/api/flows/"+id, doc)
	return id
}

// run is a run as the API answers it.
type run struct {
	ID         string                     `json:"id"`
	Flow       string                     `json:"flow"`
	Status     string                     `json:"status"`
	Output     json.RawMessage            `json:"output"`
	Error      string                     `json:"error"`
	ErrorNode  string                     `json:"error_node"`
	Steps      int                        `json:"steps"`
	Dead       int                        `json:"dead_letters"`
	ParentRun  string                     `json:"parent_run"`
	ParentCkpt string                     `json:"parent_checkpoint"`
	Waiting    map[string]server.WaitView `json:"waiting"`
	LastCkpt   string                     `json:"last_checkpoint"`
}

// start starts a run and returns its id (202).
func (a *api) start(flow string, req any) string {
	a.t.Helper()
	var s server.Started
	a.must(http.StatusAccepted, "POST", "/api/flows/"+flow+"/runs", req).into(a.t, &s)
	if s.Run == "" {
		a.t.Fatal("no run id in the answer")
	}
	return s.Run
}

// settle waits (through the API) until the run finishes or waits for a person.
func (a *api) settle(flow, id string) run {
	a.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var r run
		a.must(http.StatusOK, "GET", "/api/flows/"+flow+"/runs/"+id+"?wait=10s", nil).into(a.t, &r)
		if store.Finished(r.Status) || r.Status == store.StatusWaiting {
			return r
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("run %s still %s after 30s", id, r.Status)
		}
	}
}

// eventually retries check until it returns "" or d passes, then fails with its answer.
func eventually(t *testing.T, d time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newTeams is a team store of the test's own, emptied when the test ends.
func newTeams(t *testing.T, r *store.Redis) *store.Teams {
	t.Helper()
	return r.Teams(newTeamsNS(t, r))
}

// newTeamsNS is a team store namespace of the test's own, emptied when the test ends.
func newTeamsNS(t *testing.T, r *store.Redis) string {
	t.Helper()
	ns := storetest.FlowID(t)
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := r.Client.Keys(ctx, "sluice:{teams"+ns+"}:*").Result()
		if len(keys) > 0 {
			r.Client.Del(ctx, keys...)
		}
	})
	return ns
}
