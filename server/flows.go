package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/langflow"
	"github.com/sluicehq/sluice/store"
)

// compiler validates and compiles flow documents.
type compiler interface {
	Compile(doc []byte) (*flows.Plan, flows.Problems, error)
}

// FlowSummary is one flow of the library, as GET /api/flows lists it: its saved file
// (what runs), and its draft if it has one.
type FlowSummary struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	Nodes       int       `json:"nodes"`
	Valid       bool      `json:"valid"`
	Version     string    `json:"version,omitempty"` // set when valid
	Errors      int       `json:"errors"`
	Warnings    int       `json:"warnings"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Published is false for a flow that is only a draft so far: it cannot run yet.
	Published bool `json:"published"`
	// Draft is the flow's unpublished working copy, if any.
	Draft *DraftSummary `json:"draft,omitempty"`
}

// DraftSummary is a flow's draft as the list shows it.
type DraftSummary struct {
	Valid     bool      `json:"valid"`
	Errors    int       `json:"errors"`
	Warnings  int       `json:"warnings"`
	UpdatedAt time.Time `json:"updated_at"`
}

// DraftSaved is the answer to PUT /api/flows/FLOW/draft.
type DraftSaved struct {
	ID    string `json:"id"`
	Draft bool   `json:"draft"` // always true: nothing was published
	// Valid says whether the draft would publish: saving it with PUT /api/flows/FLOW does.
	Valid    bool           `json:"valid"`
	Version  string         `json:"version,omitempty"` // the version it would publish
	Problems flows.Problems `json:"problems"`
}

// FlowList is the body of GET /api/flows.
type FlowList struct {
	Flows []FlowSummary `json:"flows"`
}

// SavedFlow is the answer to a save or an import.
type SavedFlow struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	// Published is true when the version is live: new runs start on it and the
	// in-process workers serve it.
	Published bool `json:"published"`
	// Problems are the document's warnings (a document with errors is not saved, but for
	// a partial import, whose placeholders are errors until replaced: save it as a draft
	// with PUT /api/flows/FLOW/draft).
	Problems flows.Problems `json:"problems"`
	// Import reports what converting an imported Langflow export did.
	Import *ImportReport `json:"import,omitempty"`
}

// ImportReport says how a Langflow export was converted: the nodes without a Sluice
// equivalent (placeholders in a partial import) and notes such as keys not copied.
type ImportReport struct {
	From  string          `json:"from"` // "langflow"
	Gaps  []langflow.Gap  `json:"gaps"`
	Notes []langflow.Note `json:"notes"`
}

// Validation is the answer of POST /api/flows/validate.
type Validation struct {
	Valid    bool           `json:"valid"`
	ID       string         `json:"id,omitempty"`
	Version  string         `json:"version,omitempty"`
	Problems flows.Problems `json:"problems"`
}

func (s *Server) listFlows(c echo.Context) error {
	ws := workspaceOf(c)
	files, err := s.library.ListIn(ws)
	if err != nil {
		return err
	}
	drafts, err := s.library.DraftsIn(ws)
	if err != nil {
		return err
	}
	byID := map[string]*FlowSummary{}
	out := FlowList{Flows: make([]FlowSummary, 0, len(files))}
	for _, f := range files {
		sum := s.summarize(f)
		sum.Published = true
		out.Flows = append(out.Flows, sum)
	}
	for i := range out.Flows {
		byID[out.Flows[i].ID] = &out.Flows[i]
	}
	for _, d := range drafts {
		ds := s.summarize(d)
		draft := &DraftSummary{Valid: ds.Valid, Errors: ds.Errors, Warnings: ds.Warnings, UpdatedAt: ds.UpdatedAt}
		if sum, ok := byID[d.ID]; ok {
			sum.Draft = draft
			continue
		}
		// Only a draft so far: listed by it, with nothing published.
		ds.Valid, ds.Version, ds.Draft = false, "", draft
		out.Flows = append(out.Flows, ds)
	}
	sort.Slice(out.Flows, func(i, j int) bool { return out.Flows[i].ID < out.Flows[j].ID })
	return c.JSON(http.StatusOK, out)
}

// summarize reads a flow document's name, size and problems.
func (s *Server) summarize(f store.LibraryFile) FlowSummary {
	var comp compiler = s.engine
	sum := FlowSummary{ID: f.ID, Name: f.ID}
	if st, err := os.Stat(f.Path); err == nil {
		sum.UpdatedAt = st.ModTime().UTC()
	}
	var head struct {
		Name        string            `json:"name"`
		Description string            `json:"description"`
		Nodes       []json.RawMessage `json:"nodes"`
	}
	if json.Unmarshal(f.Data, &head) == nil {
		if head.Name != "" {
			sum.Name = head.Name
		}
		sum.Description, sum.Nodes = head.Description, len(head.Nodes)
	}
	plan, probs, _ := comp.Compile(f.Data)
	if plan != nil {
		sum.Valid, sum.Version = true, plan.Version
	}
	for _, p := range probs {
		if p.Severity == flows.SeverityError {
			sum.Errors++
		} else {
			sum.Warnings++
		}
	}
	return sum
}

// getFlow answers the flow's file as it is saved (what runs); a flow that is only a
// draft so far has none.
func (s *Server) getFlow(c echo.Context) error {
	id, err := flowParam(c)
	if err != nil {
		return err
	}
	data, err := s.library.Load(id)
	if flows.ErrorCode(err) == flows.NotFound {
		if _, derr := s.library.LoadDraft(id); derr == nil {
			return &flows.Error{Code: flows.NotFound, Flow: id, Message: "this flow is only a draft so far (it has never been saved valid): GET /api/flows/" + id + "/draft reads it"}
		}
	}
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, data)
}

// getDraft answers the flow's draft: its working copy as last autosaved, problems and all.
func (s *Server) getDraft(c echo.Context) error {
	id, err := flowParam(c)
	if err != nil {
		return err
	}
	data, err := s.library.LoadDraft(id)
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, data)
}

// saveDraft keeps a working copy whatever its problems; nothing is published, so runs,
// webhooks and headless workers go on with the saved file. ?create=true refuses (409)
// to write over a flow that exists.
func (s *Server) saveDraft(c echo.Context) error {
	id := c.Param("flow")
	if !flows.ValidFlowID(id) {
		return &flows.Error{Code: flows.Invalid, Path: "id", Message: fmt.Sprintf("flow id %q is not valid: use lower-case letters, digits, '-' and '_'", id)}
	}
	doc, err := readBody(c)
	if err != nil {
		return err
	}
	doc = qualifyDoc(workspaceOf(c), doc)
	var head map[string]json.RawMessage
	if err := json.Unmarshal(doc, &head); err != nil || head == nil {
		return &flows.Error{Code: flows.Invalid, Flow: id, Message: "a draft is a flow document: a JSON object"}
	}
	var docID string
	if raw, ok := head["id"]; ok && json.Unmarshal(raw, &docID) != nil {
		return &flows.Error{Code: flows.Invalid, Flow: id, Path: "id", Message: "must be a string"}
	}
	if docID != id {
		return &flows.Error{Code: flows.Invalid, Flow: id, Path: "id", Message: fmt.Sprintf("the document's id %q is not the flow's id %q in the URL", docID, id)}
	}
	if c.QueryParam("create") == "true" && s.library.Exists(id) {
		return &flows.Error{Code: flows.Conflict, Flow: id, Message: "a flow with this id exists"}
	}
	existed := s.library.Exists(id)
	if err := s.library.SaveDraft(id, doc); err != nil {
		return err
	}
	var comp compiler = s.engine
	plan, probs, _ := comp.Compile(doc)
	out := DraftSaved{ID: id, Draft: true, Valid: plan != nil, Problems: probs}
	if out.Problems == nil {
		out.Problems = flows.Problems{}
	}
	if plan != nil {
		out.Version = plan.Version
	}
	status := http.StatusOK
	if !existed {
		status = http.StatusCreated
	}
	return c.JSON(status, out)
}

// deleteDraft discards a flow's draft; the saved file stays as it is.
func (s *Server) deleteDraft(c echo.Context) error {
	id, err := flowParam(c)
	if err != nil {
		return err
	}
	if err := s.library.DeleteDraft(id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) exportFlow(c echo.Context) error {
	id, err := flowParam(c)
	if err != nil {
		return err
	}
	data, err := s.library.Load(id)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": id + ".json"}))
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, data)
}

func (s *Server) validateFlow(c echo.Context) error {
	doc, err := readBody(c)
	if err != nil {
		return err
	}
	var comp compiler = s.engine
	plan, probs, _ := comp.Compile(doc)
	v := Validation{Valid: plan != nil, Problems: probs}
	if v.Problems == nil {
		v.Problems = flows.Problems{}
	}
	if plan != nil {
		v.ID, v.Version = plan.Flow, plan.Version
	}
	return c.JSON(http.StatusOK, v)
}

// saveFlow writes the flow's file after validating it, and publishes the new version at
// once so the in-process workers serve it without a restart.
func (s *Server) saveFlow(c echo.Context) error {
	id := c.Param("flow")
	if !flows.ValidFlowID(id) {
		return &flows.Error{Code: flows.Invalid, Path: "id", Message: fmt.Sprintf("flow id %q is not valid: use lower-case letters, digits, '-' and '_'", id)}
	}
	doc, err := readBody(c)
	if err != nil {
		return err
	}
	doc = qualifyDoc(workspaceOf(c), doc)
	if c.QueryParam("create") == "true" && s.library.Exists(id) {
		return &flows.Error{Code: flows.Conflict, Flow: id, Message: "a flow with this id exists"}
	}
	_, existed := s.library.Load(id)
	saved, err := s.save(c, id, doc)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if flows.ErrorCode(existed) == flows.NotFound {
		status = http.StatusCreated
	}
	return c.JSON(status, saved)
}

// importFlow adds a flow from an uploaded document (a JSON body); the flow's id comes
// from the document. An existing flow is replaced only with ?overwrite=true. A multipart
// upload is refused (protect.go): it is what another site's form could send.
func (s *Server) importFlow(c echo.Context) error {
	doc, err := readBody(c)
	if err != nil {
		return err
	}
	if langflow.IsExport(doc) {
		return s.importLangflow(c, doc)
	}
	doc = qualifyDoc(workspaceOf(c), doc)
	var comp compiler = s.engine
	plan, _, err := comp.Compile(doc)
	if err != nil {
		return err
	}
	if _, lerr := s.library.Load(plan.Flow); lerr == nil && c.QueryParam("overwrite") != "true" {
		return &flows.Error{Code: flows.Conflict, Flow: plan.Flow, Message: "a flow with this id exists; import with ?overwrite=true to replace it, or change the document's id"}
	}
	saved, err := s.save(c, plan.Flow, doc)
	if err != nil {
		return err
	}
	auditTarget(c, plan.Flow)
	c.Response().Header().Set(echo.HeaderLocation, "/api/flows/"+plan.Flow)
	return c.JSON(http.StatusCreated, saved)
}

func (s *Server) save(c echo.Context, id string, doc []byte) (*SavedFlow, error) {
	var comp compiler = s.engine
	plan, probs, err := comp.Compile(doc)
	if err != nil {
		return nil, err
	}
	if plan.Flow != id {
		probs = append(probs, flows.Problem{Severity: flows.SeverityError, Code: flows.CodeInvalidID, Path: "id",
			Message: fmt.Sprintf("the document's id %q is not the flow's id %q in the URL", plan.Flow, id)})
		return nil, &flows.InvalidError{Flow: id, Problems: probs}
	}
	if err := s.library.Save(id, doc); err != nil {
		return nil, err
	}
	wroteFlow(c, id) // git.go
	// The working copy is published now: its draft is done with.
	if err := s.library.DeleteDraft(id); err != nil && flows.ErrorCode(err) != flows.NotFound {
		s.log.Warn("saved flow's draft not removed", "flow", id, "error", err)
	}
	saved := &SavedFlow{ID: id, Version: plan.Version, Problems: probs}
	if saved.Problems == nil {
		saved.Problems = flows.Problems{}
	}
	if s.sync != nil {
		ctx := c.Request().Context()
		if _, _, err := s.sync.PublishNote(ctx, id, doc, c.QueryParam("message")); err != nil {
			// The file is saved; the library watcher publishes it when Redis is back.
			s.log.Warn("saved flow not published yet", "flow", id, "error", err)
			return saved, nil
		}
		saved.Published = true
		// Who saved it, for the version history (the first to save a version).
		if s.rdb != nil {
			if err := s.rdb.NoteSavedBy(ctx, id, plan.Version, byFrom(ctx)); err != nil {
				s.log.Warn("who saved the flow is not recorded", "flow", id, "error", err)
			}
		}
	}
	return saved, nil
}

func (s *Server) deleteFlow(c echo.Context) error {
	id, err := flowParam(c)
	if err != nil {
		return err
	}
	if err := s.library.Delete(id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// CodeUnmapped is the problem code of a Langflow node that has no Sluice equivalent.
const CodeUnmapped = "langflow_unmapped"

// importLangflow converts a Langflow export and saves it. Nodes without an equivalent
// refuse the import unless ?partial=true, which saves the flow with placeholder nodes:
// the file is written (the editor opens it) but not published, since it does not
// validate until the placeholders are replaced.
func (s *Server) importLangflow(c echo.Context, export []byte) error {
	id := c.QueryParam("id")
	if id != "" && !flows.ValidID(id) {
		return &flows.Error{Code: flows.Invalid, Path: "id", Message: fmt.Sprintf("flow id %q: use lower-case letters, digits, '-' and '_'", id)}
	}
	// The conversion stops when the client goes away, and within a deadline anyway.
	ctx, cancel := context.WithTimeout(c.Request().Context(), langflow.Timeout)
	defer cancel()
	res, err := langflow.Convert(ctx, export, langflow.Options{ID: id, Model: c.QueryParam("model")})
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &flows.Error{Code: flows.TooLarge, Message: fmt.Sprintf("the Langflow export did not convert within %s: it is too large or too tangled to import", langflow.Timeout), Err: err}
	case errors.Is(err, context.Canceled):
		// The client has gone: no one reads the answer, and it is no failure of the server.
		return &flows.Error{Code: flows.Invalid, Message: "the import stopped: the client went away", Err: err}
	case errors.Is(err, langflow.ErrTooLarge):
		return &flows.Error{Code: flows.TooLarge, Message: err.Error()}
	case err != nil:
		return &flows.Error{Code: flows.Invalid, Message: err.Error()}
	}
	res.Document = qualifyDoc(workspaceOf(c), res.Document)
	var head struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(res.Document, &head)
	report := &ImportReport{From: "langflow", Gaps: res.Gaps, Notes: res.Notes}
	if report.Gaps == nil {
		report.Gaps = []langflow.Gap{}
	}
	if report.Notes == nil {
		report.Notes = []langflow.Note{}
	}
	partial := c.QueryParam("partial") == "true"
	if len(res.Gaps) > 0 && !partial {
		probs := make(flows.Problems, len(res.Gaps))
		for i, g := range res.Gaps {
			probs[i] = flows.Problem{Severity: flows.SeverityError, Code: CodeUnmapped, Node: g.Node,
				Message: fmt.Sprintf("Langflow node %s (%s) has no Sluice equivalent: %s", g.Node, g.Type, g.Why)}
		}
		return &flows.InvalidError{Flow: head.ID, Problems: probs}
	}
	if _, lerr := s.library.Load(head.ID); lerr == nil && c.QueryParam("overwrite") != "true" {
		return &flows.Error{Code: flows.Conflict, Flow: head.ID, Message: "a flow with this id exists; import with ?overwrite=true to replace it, or give another ?id="}
	}
	var saved *SavedFlow
	if len(res.Gaps) == 0 {
		saved, err = s.save(c, head.ID, res.Document)
		var invalid *flows.InvalidError
		// A flow that converted whole but does not validate (a URL left out because it
		// held a key) is refused, unless partial: then it is saved to be finished in the
		// editor, as one with placeholders is.
		if errors.As(err, &invalid) && partial {
			saved, err = nil, nil
		}
		if err != nil {
			return err
		}
	}
	if saved == nil {
		var comp compiler = s.engine
		_, probs, _ := comp.Compile(res.Document)
		if err := s.library.Save(head.ID, res.Document); err != nil {
			return err
		}
		wroteFlow(c, head.ID)
		saved = &SavedFlow{ID: head.ID, Problems: probs}
	}
	saved.Import = report
	auditTarget(c, head.ID)
	c.Response().Header().Set(echo.HeaderLocation, "/api/flows/"+head.ID)
	return c.JSON(http.StatusCreated, saved)
}
