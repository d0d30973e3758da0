package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/cases"
	"github.com/sluicehq/sluice/store"
)

// maxCasesRun bounds one POST /api/flows/FLOW/cases/run: every case has its own timeout
// too (default 2m), and the request's context ends the cases' waits when the client goes.
const maxCasesRun = 10 * time.Minute

// CasesView is the body of GET /api/flows/FLOW/cases: the flow's cases file (an empty
// one when it has none yet) and its problems against the flow's saved nodes.
type CasesView struct {
	Flow     string          `json:"flow"`
	Exists   bool            `json:"exists"`
	File     json.RawMessage `json:"file"`
	Problems flows.Problems  `json:"problems"`
}

// SaveCaseRequest is the body of POST /api/flows/FLOW/cases: save a run as a test case.
type SaveCaseRequest struct {
	// Run is the run whose input (and output, as the expected one) the case takes.
	Run string `json:"run"`
	// Node, when set, makes the case start at this node with the state it received in
	// the run: the nodes before it do not run again.
	Node string `json:"node,omitempty"`
	// ID names the case (default: from the run's id); Name describes it.
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// SavedCase is the answer to saving a run as a case.
type SavedCase struct {
	Case cases.Case `json:"case"`
	// File is the cases file as saved.
	File json.RawMessage `json:"file"`
}

// RunCasesRequest is the body of POST /api/flows/FLOW/cases/run.
type RunCasesRequest struct {
	// Document is the flow to test (the editor's working copy, a draft too); default the
	// saved file.
	Document json.RawMessage `json:"document,omitempty"`
	// Version tests a version of the flow's history instead.
	Version string `json:"version,omitempty"`
	// File is the cases to run (the Tests tab's edits, unsaved); default the saved file.
	File json.RawMessage `json:"file,omitempty"`
	// Cases, when set, runs only the cases with these ids.
	Cases []string `json:"cases,omitempty"`
}

// TestSummaries is the body of GET /api/flows/FLOW/tests: each version's last test.
type TestSummaries struct {
	Flow     string                      `json:"flow"`
	Versions map[string]cases.LastResult `json:"versions"`
}

// flowNodes are the node ids of flow's saved file, or of its draft; nil when it has
// neither (nothing to check the cases against).
func (s *Server) flowNodes(flow string) map[string]bool {
	doc, err := s.library.Load(flow)
	if err != nil {
		if doc, err = s.library.LoadDraft(flow); err != nil {
			return nil
		}
	}
	return docNodes(doc)
}

func docNodes(doc []byte) map[string]bool {
	var d struct {
		Nodes []struct {
			ID string `json:"id"`
		} `json:"nodes"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return nil
	}
	out := map[string]bool{}
	for _, n := range d.Nodes {
		out[n.ID] = true
	}
	return out
}

// existingFlow refuses a flow the library has neither a file nor a draft of.
func (s *Server) existingFlow(c echo.Context) (string, error) {
	flow, err := flowParam(c)
	if err != nil {
		return "", err
	}
	if !s.library.Exists(flow) {
		return "", &flows.Error{Code: flows.NotFound, Flow: flow, Message: "no such flow"}
	}
	return flow, nil
}

// emptyCases is the file of a flow with no cases yet.
func emptyCases(flow string) []byte {
	b, _ := (&cases.File{Flow: flow}).Marshal()
	return b
}

// getCases serves GET /api/flows/:flow/cases.
func (s *Server) getCases(c echo.Context) error {
	flow, err := s.existingFlow(c)
	if err != nil {
		return err
	}
	v := CasesView{Flow: flow, Exists: true, Problems: flows.Problems{}}
	data, err := s.library.LoadCases(flow)
	if flows.ErrorCode(err) == flows.NotFound {
		v.Exists, data = false, emptyCases(flow)
	} else if err != nil {
		return err
	}
	if !json.Valid(data) {
		v.File = json.RawMessage("null")
		v.Problems = flows.Problems{{Severity: flows.SeverityError, Code: flows.CodeSyntax, Message: "the cases file is not JSON"}}
		return c.JSON(http.StatusOK, v)
	}
	v.File = data
	if _, probs := cases.Parse(data, s.flowNodes(flow)); len(probs) > 0 {
		v.Problems = probs
	}
	return c.JSON(http.StatusOK, v)
}

// saveCases serves PUT /api/flows/:flow/cases: the whole file, checked (every problem at
// its JSON path, 400) against the flow's nodes, then written beside the flow.
func (s *Server) saveCases(c echo.Context) error {
	flow, err := s.existingFlow(c)
	if err != nil {
		return err
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	f, probs := cases.Parse(body, s.flowNodes(flow))
	if f == nil {
		return &flows.InvalidError{Flow: flow, Problems: probs}
	}
	// In a workspace the engine's flow is W.F; the file names the flow as its document
	// does, F.
	bare := flow
	if _, b, ok := strings.Cut(flow, "."); ok {
		bare = b
	}
	if f.Flow == "" {
		f.Flow = bare
	} else if f.Flow != flow && f.Flow != bare {
		return &flows.Error{Code: flows.Invalid, Flow: flow, Path: "flow", Message: fmt.Sprintf("the cases are flow %q's", f.Flow)}
	}
	return s.writeCases(c, flow, f, http.StatusOK)
}

func (s *Server) writeCases(c echo.Context, flow string, f *cases.File, status int) error {
	out, err := f.Marshal()
	if err != nil {
		return err
	}
	if err := s.library.SaveCases(flow, out); err != nil {
		return err
	}
	v := CasesView{Flow: flow, Exists: true, File: out, Problems: flows.Problems{}}
	return c.JSON(status, v)
}

// loadCasesFile is the flow's saved cases file, or an empty one.
func (s *Server) loadCasesFile(flow string) (*cases.File, error) {
	data, err := s.library.LoadCases(flow)
	if flows.ErrorCode(err) == flows.NotFound {
		return &cases.File{Format: 1, Flow: flow}, nil
	}
	if err != nil {
		return nil, err
	}
	f, probs := cases.Parse(data, nil)
	if f == nil {
		return nil, &flows.InvalidError{Flow: flow, Problems: probs}
	}
	return f, nil
}

// addCase serves POST /api/flows/:flow/cases: a run saved as a test case. The case takes
// the run's input (or, with node, the state that node received), its output as the
// expected one ({"equals": OUTPUT}, which the Tests tab can edit), and each node's output,
// so a later run of the case shows which nodes' outputs changed.
func (s *Server) addCase(c echo.Context) error {
	flow, err := s.existingFlow(c)
	if err != nil {
		return err
	}
	var req SaveCaseRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	if req.Run == "" {
		return &flows.Error{Code: flows.Invalid, Flow: flow, Path: "run", Message: "name the run to save as a case"}
	}
	ctx := c.Request().Context()
	run, err := s.runs().Info(ctx, flow, req.Run)
	if err != nil {
		return err
	}
	cps, err := s.history().Checkpoints(ctx, flow, req.Run)
	if err != nil {
		return err
	}
	f, err := s.loadCasesFile(flow)
	if err != nil {
		return err
	}
	cs, err := s.caseOf(ctx, flow, run.Run, cps, req)
	if err != nil {
		return err
	}
	if f.Find(cs.ID) != nil {
		return &flows.Error{Code: flows.Conflict, Flow: flow, Path: "id", Message: fmt.Sprintf("the flow already has a case %q", cs.ID)}
	}
	f.Cases = append(f.Cases, *cs)
	if probs := f.Check(nil); len(probs.Errors()) > 0 {
		return &flows.InvalidError{Flow: flow, Problems: probs}
	}
	out, err := f.Marshal()
	if err != nil {
		return err
	}
	if err := s.library.SaveCases(flow, out); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, SavedCase{Case: *cs, File: out})
}

// caseOf builds the case a run is saved as.
func (s *Server) caseOf(ctx context.Context, flow string, run *store.Run, cps []store.Checkpoint, req SaveCaseRequest) (*cases.Case, error) {
	id := req.ID
	if id == "" {
		id = "run-" + run.ID
		if len(id) > flows.MaxIDLen {
			id = id[:flows.MaxIDLen]
		}
	}
	if !flows.ValidID(id) {
		return nil, &flows.Error{Code: flows.Invalid, Flow: flow, Path: "id", Message: fmt.Sprintf("case id %q: use lower-case letters, digits, '-' and '_'", id)}
	}
	cs := &cases.Case{ID: id, Name: req.Name,
		Origin: &cases.Origin{Run: run.ID, Version: run.Version, SavedAt: time.Now().UTC().Format(time.RFC3339)}}
	if req.Node == "" {
		cs.Input = run.Input
		if cs.Input == nil {
			cs.Input = json.RawMessage("{}")
		}
	} else {
		var at *store.Checkpoint
		for i := range cps {
			if cps[i].Node == req.Node && cps[i].IsState() && cps[i].Parent != "" {
				at = &cps[i]
				break
			}
		}
		if at == nil {
			return nil, &flows.Error{Code: flows.Invalid, Flow: flow, Path: "node", Message: fmt.Sprintf("node %q did not run in run %s", req.Node, run.ID)}
		}
		state, err := s.receivedState(ctx, flow, run.ID, at.ID)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(state)
		cs.Start = &cases.Start{Node: req.Node, State: b}
		cs.Origin.Checkpoint = at.ID
	}
	switch run.Status {
	case store.StatusSucceeded:
		out := run.Output()
		if out == nil {
			out = json.RawMessage("null")
		}
		cs.Expect = []cases.Assertion{{Equals: out}}
	case store.StatusFailed:
		node := run.ErrorNode
		if node == "" {
			node = "*"
		}
		cs.Expect = []cases.Assertion{{FailsAt: node}}
	default:
		return nil, &flows.Error{Code: flows.Conflict, Flow: flow, Path: "run", Message: fmt.Sprintf("run %s is %s: save a run that has finished", run.ID, run.Status)}
	}
	cs.NodeOutputs = cases.NodeOutputs(cps)
	return cs, nil
}

// runCases serves POST /api/flows/:flow/cases/run: the cases (saved, or the ones given)
// run on the document given (a working copy or draft: nothing is saved or published),
// a version, or the saved file, and the report is recorded as that version's last test.
func (s *Server) runCases(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	var req RunCasesRequest
	if err := decodeRequest(c, &req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), maxCasesRun)
	defer cancel()
	var plan *flows.Plan
	switch {
	case len(req.Document) > 0 && req.Version != "":
		return &flows.Error{Code: flows.Invalid, Flow: flow, Path: "version", Message: "give a document or a version, not both"}
	case len(req.Document) > 0:
		var probs flows.Problems
		if plan, probs, err = s.runs().Compile(req.Document); err != nil {
			return &flows.InvalidError{Flow: flow, Problems: probs}
		}
		if plan.Flow != flow {
			return &flows.Error{Code: flows.Invalid, Flow: flow, Path: "document.id", Message: "the document is another flow's"}
		}
	case req.Version != "":
		full, err := s.engine.ResolveVersion(ctx, flow, req.Version)
		if err != nil {
			return err
		}
		if plan, err = s.runs().Plan(ctx, flow, full); err != nil {
			return err
		}
	default:
		if plan, err = s.planFor(ctx, flow, ""); err != nil {
			return err
		}
	}
	var f *cases.File
	if len(req.File) > 0 {
		f, err = cases.ForPlan(req.File, plan)
	} else {
		var data []byte
		if data, err = s.library.LoadCases(flow); err == nil {
			f, err = cases.ForPlan(data, plan)
		}
	}
	if err != nil {
		return err
	}
	if s.sync != nil {
		// The in-process workers serve library flows; a working copy of a flow never
		// saved is served from here on too.
		s.sync.Serve(plan.Flow)
	}
	rs, err := cases.Run(ctx, s.engine, plan, f, cases.Options{Parallel: 4, Grader: s.grader, Only: req.Cases})
	if err != nil {
		return err
	}
	rep := cases.NewReport(flow, plan.Version, rs)
	rep.Draft = len(req.Document) > 0 && !s.isSaved(flow, plan.Version)
	if s.rdb != nil {
		if err := cases.Record(ctx, s.rdb, rep); err != nil {
			s.log.Warn("cannot record a test result", "flow", flow, "error", err)
		}
	}
	return c.JSON(http.StatusOK, rep)
}

// isSaved reports whether version is the flow's saved file's.
func (s *Server) isSaved(flow, version string) bool {
	doc, err := s.library.Load(flow)
	if err != nil {
		return false
	}
	p, _, err := s.runs().Compile(doc)
	return err == nil && p.Version == version
}

// listTests serves GET /api/flows/:flow/tests: each version's last test result; to
// whoever may not see run state, without why a case failed (it quotes the output).
func (s *Server) listTests(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	all, err := s.rdb.TestSummaries(c.Request().Context(), flow)
	if err != nil {
		return err
	}
	out := TestSummaries{Flow: flow, Versions: map[string]cases.LastResult{}}
	for v, raw := range all {
		var l cases.LastResult
		if json.Unmarshal(raw, &l) == nil {
			if stateHidden(c) {
				for i := range l.Verdicts {
					l.Verdicts[i].Why = ""
				}
			}
			out.Versions[v] = l
		}
	}
	return c.JSON(http.StatusOK, out)
}

// getTest serves GET /api/flows/:flow/tests/:version: a version's whole last test
// result (kept a week).
func (s *Server) getTest(c echo.Context) error {
	flow, err := flowParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	v, err := s.engine.ResolveVersion(ctx, flow, c.Param("version"))
	if flows.ErrorCode(err) == flows.NotFound {
		// A working copy's version is in no history: look among the tested ones.
		if sums, serr := s.rdb.TestSummaries(ctx, flow); serr == nil {
			for tested := range sums {
				if p := c.Param("version"); len(p) >= 7 && strings.HasPrefix(tested, p) {
					v, err = tested, nil
				}
			}
		}
	}
	if err != nil {
		return err
	}
	raw, err := s.rdb.TestResult(ctx, flow, v)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, raw)
}
