package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/examples"
	"github.com/sluicehq/sluice/static"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/templ/layout"
	"github.com/sluicehq/sluice/templ/pages"
)

// pageEngine is what the pages read of the runtime: they show, they never change runs
// (the pages' buttons call the JSON API for that).
type pageEngine interface {
	Compile(doc []byte) (*flows.Plan, flows.Problems, error)
	Registry() *flows.Registry
	List(ctx context.Context, flow string, q engine.ListQuery) ([]*store.Run, int64, error)
	Info(ctx context.Context, flow, run string) (*engine.RunInfo, error)
	Checkpoints(ctx context.Context, flow, run string) ([]store.Checkpoint, error)
	Checkpoint(ctx context.Context, flow, run, id string) (*store.Checkpoint, error)
	Diff(ctx context.Context, flow, run, a, b string) ([]engine.Change, error)
	Versions(ctx context.Context, flow string) (*engine.VersionHistory, error)
	CatalogPlans(ctx context.Context, flow string) ([]*flows.Plan, string)
}

// pageStore is what the queues page reads of Redis.
type pageStore interface {
	Queues(ctx context.Context, flow string) (*store.FlowQueues, error)
	DeadLetters(ctx context.Context, flow string, count int64) ([]store.DeadLetter, error)
	Flows(ctx context.Context) ([]string, error)
}

var (
	_ pageEngine = (*engine.Engine)(nil)
	_ pageStore  = (*store.Redis)(nil)
)

func (s *Server) render(c echo.Context, status int, t templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return t.Render(c.Request().Context(), c.Response())
}

func (s *Server) page(title, section string) layout.Page {
	return layout.Page{Title: title, Section: section, Embedded: s.cfg.Embedded, Bundle: static.HasBundle(), Asset: static.Path}
}

func (s *Server) pageEngine() pageEngine { return s.engine }

// pageStore is nil when the server runs without Redis (some tests).
func (s *Server) pageStore() pageStore {
	if s.rdb == nil {
		return nil
	}
	return s.rdb
}

func (s *Server) homePage(c echo.Context) error {
	files, err := s.library.ListIn(workspaceOf(c))
	if err != nil {
		return err
	}
	drafts, err := s.library.DraftsIn(workspaceOf(c))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	items := make([]pages.FlowItem, 0, len(files))
	byID := map[string]int{}
	for _, f := range files {
		item := s.flowItem(f)
		item.Published = true
		if runs, _, err := s.pageEngine().List(ctx, f.ID, engine.ListQuery{Limit: recentRuns}); err == nil && len(runs) > 0 {
			r := runItem(runs[0], stateHidden(c))
			item.LastRun = &r
			item.Recent = recentStats(runs)
		}
		byID[f.ID] = len(items)
		items = append(items, item)
	}
	for _, d := range drafts {
		di := s.flowItem(d)
		if i, ok := byID[d.ID]; ok {
			items[i].Draft, items[i].DraftErrors = true, di.Errors
			continue
		}
		di.Draft, di.DraftErrors = true, di.Errors
		items = append(items, di)
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].ID < items[j].ID })
	p := s.page("Flows", "flows")
	p.CSRF = s.csrfToken(c)
	return s.render(c, http.StatusOK, pages.Home(p, s.library.Dir, items, s.gallery()))
}

// flowItem reads a flow document for the flows page: name, size, problems.
func (s *Server) flowItem(f store.LibraryFile) pages.FlowItem {
	var head struct {
		Name  string            `json:"name"`
		Nodes []json.RawMessage `json:"nodes"`
	}
	item := pages.FlowItem{ID: f.ID}
	if err := json.Unmarshal(f.Data, &head); err != nil {
		item.Problem = "not valid JSON: " + err.Error()
	} else {
		plan, probs, _ := s.pageEngine().Compile(f.Data)
		if plan != nil && s.rdb != nil {
			if by, err := s.rdb.SavedBy(context.Background(), f.ID); err == nil {
				item.SavedBy = by[plan.Version]
			}
		}
		for _, p := range probs {
			if p.Severity == flows.SeverityError {
				item.Errors++
			} else {
				item.Warnings++
			}
		}
	}
	item.Name, item.Nodes = head.Name, len(head.Nodes)
	if item.Name == "" {
		item.Name = f.ID
	}
	return item
}

// editorData is what the editor island is given (ui/src/editor/Editor.tsx EditorData).
type editorData struct {
	// Flow is the working copy: the draft when there is one, else the saved file.
	Flow json.RawMessage `json:"flow"`
	// Published is the saved file (what runs); null for a new flow or one that is only a draft.
	Published  json.RawMessage `json:"published"`
	Draft      bool            `json:"draft"`
	Components []*flows.Spec   `json:"components"`
	IsNew      bool            `json:"isNew"`
	// Auth says the API needs the server's token (the API panel's snippets read it from
	// SLUICE_TOKEN; the token itself is never in the page).
	Auth bool `json:"auth"`
	// Cases are, for a new flow from an example, the example's test cases: the editor
	// keeps them with the flow's first save.
	Cases json.RawMessage `json:"cases,omitempty"`
	// Can and Why are what the viewer's role allows here (docs/teams.md): the editor
	// disables the rest, saying why. Absent in the single-person mode.
	Can map[string]bool   `json:"can,omitempty"`
	Why map[string]string `json:"why,omitempty"`
	// GitWarning says the flow's last change was saved but not committed to git
	// (serve --git-commit): why, until a commit of it succeeds.
	GitWarning string `json:"git_warning,omitempty"`
}

func (s *Server) editor(c echo.Context, title string, data editorData) error {
	if !static.HasBundle() {
		return s.render(c, http.StatusOK, pages.NoBundle(s.page(title, "flows")))
	}
	if !json.Valid(data.Flow) {
		return &flows.Error{Code: flows.Invalid, Message: "the flow file is not valid JSON; fix it in a text editor or import it again"}
	}
	if data.Published == nil || !json.Valid(data.Published) {
		data.Published = json.RawMessage("null")
	}
	p := s.page(title, "flows")
	p.Full = true
	data.Components = s.pageEngine().Registry().Specs()
	data.Auth = s.cfg.Token != ""
	if f := layout.FrameOf(c.Request().Context()); f != nil && f.Teams {
		data.Can, data.Why = f.Can, f.Why
	}
	return s.render(c, http.StatusOK, pages.Editor(p, data))
}

func (s *Server) editorPage(c echo.Context) error {
	id := c.Param("flow")
	file, err := s.library.Load(id)
	if err != nil && flows.ErrorCode(err) != flows.NotFound {
		return err
	}
	data := editorData{Flow: file, Published: file, GitWarning: s.gitWarning(id)}
	if draft, derr := s.library.LoadDraft(id); derr == nil && json.Valid(draft) {
		data.Flow, data.Draft = draft, true
	} else if err != nil {
		return err
	}
	var head struct{ Name string }
	_ = json.Unmarshal(data.Flow, &head)
	if head.Name == "" {
		head.Name = id
	}
	return s.editor(c, head.Name, data)
}

// newFlowPage opens the editor on a flow that is not saved yet: blank, or a copy of an
// example, named as asked, with an id no flow of the library has.
func (s *Server) newFlowPage(c echo.Context) error {
	name := strings.TrimSpace(c.QueryParam("name"))
	doc := flows.Document{Sluice: flows.FormatVersion, Nodes: []flows.Node{}, Edges: []flows.Edge{}}
	var exampleCases json.RawMessage
	if from := c.QueryParam("from"); from != "" {
		exampleCases, _ = examples.Cases(from)
		raw, err := examples.Read(from)
		if err != nil {
			return &flows.Error{Code: flows.NotFound, Message: fmt.Sprintf("no example %q", from)}
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return err
		}
		if name == "" {
			name = doc.Name // named after the example
		}
	}
	if name == "" {
		name = "Untitled flow"
	}
	doc.ID, doc.Name = s.freeID(slug(name)), name
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return s.editor(c, name, editorData{Flow: out, IsNew: true, Cases: exampleCases})
}

// duplicateFlowPage saves a copy of a flow under a new id and opens it.
func (s *Server) duplicateFlowPage(c echo.Context) error {
	id := c.Param("flow")
	raw, err := s.library.Load(id)
	save, file := s.library.Save, true
	if flows.ErrorCode(err) == flows.NotFound {
		raw, err = s.library.LoadDraft(id) // a flow that is only a draft is copied as one
		save, file = s.library.SaveDraft, false
	}
	if err != nil {
		return err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return &flows.Error{Code: flows.Invalid, Flow: id, Message: "the flow file is not valid JSON"}
	}
	var name string
	_ = json.Unmarshal(doc["name"], &name)
	if name == "" {
		name = id
	}
	newID := s.freeID(id + "-copy")
	doc["id"], _ = json.Marshal(newID)
	doc["name"], _ = json.Marshal(name + " (copy)")
	out, err := json.MarshalIndent(orderedDoc(doc), "", "  ")
	if err != nil {
		return err
	}
	if err := save(newID, out); err != nil {
		return err
	}
	if file {
		wroteFlow(c, newID) // committed as its own flow (git.go); a draft is not
	}
	return c.Redirect(http.StatusSeeOther, "/flows/"+newID)
}

func (s *Server) deleteFlowPage(c echo.Context) error {
	if err := s.library.Delete(c.Param("flow")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/")
}

// orderedDoc writes a flow's top-level fields in the format's order.
type orderedDoc map[string]json.RawMessage

func (d orderedDoc) MarshalJSON() ([]byte, error) {
	order := []string{"sluice", "id", "name", "description", "state", "settings", "nodes", "edges"}
	rank := func(k string) int {
		for i, o := range order {
			if o == k {
				return i
			}
		}
		return len(order)
	}
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if rank(keys[i]) != rank(keys[j]) {
			return rank(keys[i]) < rank(keys[j])
		}
		return keys[i] < keys[j]
	})
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kj, _ := json.Marshal(k)
		b.Write(kj)
		b.WriteByte(':')
		b.Write(d[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

var notID = regexp.MustCompile(`[^a-z0-9_-]+`)

// slug turns a name into a flow id: "Ticket triage!" -> "ticket-triage".
func slug(name string) string {
	s := strings.Trim(notID.ReplaceAllString(strings.ToLower(name), "-"), "-_")
	if len(s) > 56 {
		s = strings.TrimRight(s[:56], "-_")
	}
	if s == "" {
		s = "flow"
	}
	return s
}

// freeID is base, or base-2, base-3 ... whichever no flow of the library has.
func (s *Server) freeID(base string) string {
	if len(base) > 56 {
		base = base[:56]
	}
	for i := 1; ; i++ {
		id := base
		if i > 1 {
			id = fmt.Sprintf("%s-%d", base, i)
		}
		if !s.library.Exists(id) {
			return id
		}
	}
}

// flowIDs lists the flows the runs and queues pages offer: the library's and those
// that only Redis knows (run by headless workers).
func (s *Server) flowIDs(ctx context.Context) []string {
	seen := map[string]bool{}
	ws := workspaceFrom(ctx)
	if files, err := s.library.ListIn(ws); err == nil {
		for _, f := range files {
			seen[f.ID] = true
		}
	}
	if ps := s.pageStore(); ps != nil {
		if ids, err := ps.Flows(ctx); err == nil {
			for _, id := range ids {
				if inWorkspace(ws, id) {
					seen[id] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

var runStatuses = []string{store.StatusQueued, store.StatusRunning, store.StatusWaiting, store.StatusSucceeded, store.StatusFailed, store.StatusCancelled}

func (s *Server) runsPage(c echo.Context) error {
	ctx := c.Request().Context()
	r := pages.RunsPage{Flows: s.flowIDs(ctx), Flow: c.QueryParam("flow"), Status: c.QueryParam("status"), Statuses: runStatuses,
		Version: c.QueryParam("version"), Trigger: c.QueryParam("trigger")}
	if r.Flow != "" {
		id, ok := qualifyName(workspaceOf(c), r.Flow)
		if !ok {
			return &flows.Error{Code: flows.NotFound, Message: fmt.Sprintf("no flow %q", r.Flow)}
		}
		r.Flow = id
	}
	if r.Flow == "" && len(r.Flows) > 0 {
		r.Flow = r.Flows[0]
	}
	if r.Flow != "" {
		offset, _ := strconv.Atoi(c.QueryParam("offset"))
		offset = max(offset, 0)
		const limit = 50
		if h, err := s.pageEngine().Versions(ctx, r.Flow); err == nil {
			for _, v := range h.Versions {
				label := v.VersionInfo.Version[:min(12, len(v.VersionInfo.Version))]
				if !v.SavedAt.IsZero() {
					label += " · " + ago(v.SavedAt)
				}
				if v.Current {
					label += " · current"
				}
				if v.Message != "" {
					label += " · " + v.Message
				}
				r.Versions = append(r.Versions, pages.VersionOption{Version: v.VersionInfo.Version, Label: label})
			}
		}
		runs, total, err := s.pageEngine().List(ctx, r.Flow, engine.ListQuery{Status: r.Status, Version: r.Version, Trigger: r.Trigger, Offset: offset, Limit: limit})
		if err != nil {
			r.Problem = userMessage(err)
		}
		r.Total = total
		for _, run := range runs {
			r.Runs = append(r.Runs, runItem(run, stateHidden(c)))
		}
		link := func(off int) string {
			q := url.Values{"flow": {r.Flow}}
			if r.Status != "" {
				q.Set("status", r.Status)
			}
			if r.Version != "" {
				q.Set("version", r.Version)
			}
			if r.Trigger != "" {
				q.Set("trigger", r.Trigger)
			}
			if off > 0 {
				q.Set("offset", strconv.Itoa(off))
			}
			return "/runs?" + q.Encode()
		}
		if offset > 0 {
			r.Prev = link(max(offset-limit, 0))
		}
		if int64(offset+len(runs)) < total && len(runs) == limit {
			r.Next = link(offset + limit)
		}
		r.Bulk = s.bulkPanel(ctx, r)
	}
	return s.render(c, http.StatusOK, pages.Runs(s.page("Runs", "runs"), r))
}

func (s *Server) runPage(c echo.Context) error {
	ctx := c.Request().Context()
	flow, runID := c.Param("flow"), c.Param("run")
	// The flow's last event before the run is read: the page's live reload resumes after
	// it, so nothing that happens while the page loads is missed.
	lastEvent := ""
	if s.rdb != nil {
		lastEvent, _ = s.rdb.LastEventID(ctx, flow)
	}
	info, err := s.pageEngine().Info(ctx, flow, runID)
	if err != nil {
		return err
	}
	run := info.Run
	ckpts, err := s.pageEngine().Checkpoints(ctx, flow, runID)
	if err != nil {
		return err
	}
	hidden := stateHidden(c)
	r := pages.RunPage{Flow: flow, Version: run.Version, Run: runItem(run, hidden), Finished: store.Finished(run.Status),
		Input: pretty(run.Input), ErrorNode: run.ErrorNode, ParentCkpt: run.ParentCkpt, StateHidden: hidden}
	r.NoWorker = s.waitingForWorker(ctx, run)
	r.LastEvent = lastEvent
	if run.Status == store.StatusSucceeded {
		r.Output = pretty(run.Output())
	}
	if hidden {
		// Statuses, steps and times; nothing of the state (docs/teams.md).
		r.Input, r.Output = "", ""
	}
	if info.StorageBytes > 0 {
		r.Storage = bytesText(info.StorageBytes)
	}
	r.Budget = s.budgetOf(ctx, flow, run)
	r.Live = s.liveSteps(ctx, run)
	if !hidden {
		r.Replay = s.replayView(ctx, run, c.QueryParam("compare"), c.QueryParam("checkpoint"))
	}
	nodes := make([]string, 0, len(run.Waits))
	for n := range run.Waits {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		var w struct {
			Prompt   string          `json:"prompt"`
			Data     json.RawMessage `json:"data"`
			Deadline string          `json:"deadline"`
		}
		_ = json.Unmarshal(run.Waits[n], &w)
		if hidden {
			w.Prompt, w.Data = "", nil
		}
		r.Waits = append(r.Waits, pages.Wait{Node: n, Prompt: w.Prompt, Data: pretty(w.Data), Deadline: w.Deadline})
	}
	r.Usage = usageByNode(ckpts)
	selected := c.QueryParam("checkpoint")
	var longest float64
	for _, cp := range ckpts {
		longest = max(longest, cp.DurationMS)
	}
	for i, cp := range ckpts {
		if selected == "" && i == len(ckpts)-1 {
			selected = cp.ID
		}
		item := pages.Checkpoint{ID: cp.ID, Node: cp.Node, Kind: cp.Kind, Step: cp.Step, Duration: durationText(cp.DurationMS),
			Tokens: cp.Usage.InputTokens + cp.Usage.OutputTokens, Cost: costText(cp.Usage.CostUSD), Attempt: cp.Attempt, Error: cp.Error, Pinned: cp.Pinned,
			Link: fmt.Sprintf("/flows/%s/runs/%s?checkpoint=%s", flow, runID, url.QueryEscape(cp.ID))}
		if longest > 0 {
			item.Percent = int(cp.DurationMS / longest * 100)
		}
		if hidden {
			item.Error, item.Link = "", ""
		}
		r.Checkpoints = append(r.Checkpoints, item)
	}
	for i := range r.Checkpoints {
		r.Checkpoints[i].Selected = r.Checkpoints[i].ID == selected
	}
	if selected != "" && !hidden {
		cp, err := s.pageEngine().Checkpoint(ctx, flow, runID, selected)
		if err != nil {
			return err
		}
		d := &pages.CheckpointDetail{ID: cp.ID, Node: cp.Node, Kind: cp.Kind, Step: cp.Step, Update: pretty(cp.Update),
			Output: pretty(cp.Output), State: pretty(cp.State), Worker: cp.Worker, Attempt: cp.Attempt, Error: cp.Error, Pinned: cp.Pinned}
		if cp.Parent != "" && cp.Kind != "input" {
			d.ParentLink = fmt.Sprintf("/flows/%s/runs/%s?checkpoint=%s", flow, runID, url.QueryEscape(cp.Parent))
		}
		if len(cp.State) > 0 && cp.Kind != "turn" {
			d.StateRaw = json.RawMessage(cp.State)
			d.CanFork = true
		}
		if cp.Parent != "" && len(cp.State) > 0 {
			if changes, err := s.pageEngine().Diff(ctx, flow, runID, cp.Parent, cp.ID); err == nil {
				d.HasDiff = true
				for _, ch := range changes {
					d.Changes = append(d.Changes, pages.Change{Path: ch.Path, Op: ch.Op, From: compact(ch.From), To: compact(ch.To)})
				}
			}
		}
		r.Selected = d
	}
	return s.render(c, http.StatusOK, pages.Run(s.page("Run "+runID, "runs"), r))
}

func (s *Server) queuesPage(c echo.Context) error {
	ctx := c.Request().Context()
	q := pages.QueuesPage{Flows: s.flowIDs(ctx), Flow: c.QueryParam("flow")}
	if q.Flow != "" {
		id, ok := qualifyName(workspaceOf(c), q.Flow)
		if !ok {
			return &flows.Error{Code: flows.NotFound, Message: fmt.Sprintf("no flow %q", q.Flow)}
		}
		q.Flow = id
	}
	if q.Flow == "" && len(q.Flows) > 0 {
		q.Flow = q.Flows[0]
	}
	ps := s.pageStore()
	if q.Flow != "" && ps == nil {
		q.Problem = "this server has no Redis to read queues from"
	} else if q.Flow != "" {
		if !flows.ValidFlowID(q.Flow) {
			return &flows.Error{Code: flows.NotFound, Message: fmt.Sprintf("no flow %q", q.Flow)}
		}
		plans, env := s.pageEngine().CatalogPlans(ctx, q.Flow)
		q.Notes = workerNotes(plans)
		if len(q.Notes) > 0 {
			q.NotesVersion, q.NotesEnvironment = plans[0].Version, env
		}
		fq, err := ps.Queues(ctx, q.Flow)
		if err != nil {
			q.Problem = userMessage(err)
		} else {
			for _, n := range fq.Nodes {
				row := pages.QueueRow{Node: n.Node, Length: n.Length, Pending: n.Pending, Lag: n.Lag, OldestIdle: idleText(n.OldestPendingIdleMS), DeadLetters: n.DeadLetters, Consumers: noConsumer(q.Notes[n.Node])}
				var cs []string
				for _, c := range n.Consumers {
					cs = append(cs, fmt.Sprintf("%s (%d pending, idle %s)", c.Name, c.Pending, idleText(c.IdleMS)))
				}
				if len(cs) > 0 {
					row.Consumers = strings.Join(cs, ", ")
				}
				q.Nodes = append(q.Nodes, row)
			}
		}
		dead, err := ps.DeadLetters(ctx, q.Flow, 100)
		if err != nil && q.Problem == "" {
			q.Problem = userMessage(err)
		}
		for _, d := range dead {
			if stateHidden(c) {
				d.Error = ""
			}
			q.Dead = append(q.Dead, pages.DeadRow{ID: d.ID, Node: d.Node, Run: d.Run, Error: d.Error, Attempts: d.Attempts,
				Time: d.Time.Local().Format("2006-01-02 15:04:05"), TimeISO: d.Time.UTC().Format(time.RFC3339Nano)})
		}
	}
	return s.render(c, http.StatusOK, pages.Queues(s.page("Queues", "queues"), q))
}

// noConsumer is what the consumers cell says of a node no worker has read yet.
func noConsumer(note string) string {
	if note != "" {
		return note
	}
	return "none yet: a worker shows here once it reads this node"
}

// runItem is a run as lists show it; hidden leaves its error out (stateHidden).
func runItem(r *store.Run, hidden bool) pages.RunItem {
	it := pages.RunItem{ID: r.ID, Flow: r.Flow, Status: r.Status, Created: r.Created.UTC().Format(time.RFC3339), Ago: ago(r.Created),
		Steps: r.Steps, Tokens: r.Usage.InputTokens + r.Usage.OutputTokens, Error: r.Error, Parent: r.ParentRun,
		Version: r.Version, Trigger: strings.Replace(r.Trigger, ":", " ", 1), By: r.By, Environment: r.Environment}
	if r.Trigger == "hook" {
		it.Trigger = "webhook"
	}
	if hidden {
		it.Error = ""
	}
	if r.Started != nil {
		end := time.Now()
		if r.Finished != nil {
			end = *r.Finished
		}
		it.Duration = durationText(float64(end.Sub(*r.Started).Microseconds()) / 1000)
	}
	return it
}

// userMessage is what a page says about an error: a coded error's message, else that
// something went wrong (details are logged, never shown).
func userMessage(err error) string {
	var fe *flows.Error
	if errors.As(err, &fe) && fe.Code != flows.Internal && fe.Message != "" {
		return fe.Message
	}
	if isUnavailable(err) {
		return "Redis is unavailable; try again"
	}
	return "cannot read this now; try again"
}

func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

func compact(v any) string {
	if v == nil {
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 200 {
		return string(b[:199]) + "…"
	}
	return string(b)
}

func durationText(ms float64) string {
	switch {
	case ms < 1:
		return "<1 ms"
	case ms < 1000:
		return fmt.Sprintf("%.0f ms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.2f s", ms/1000)
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

func idleText(ms int64) string {
	if ms <= 0 {
		return "—"
	}
	return durationText(float64(ms))
}

func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < 10*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d s ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	}
	return t.Local().Format("2006-01-02")
}

func bytesText(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// budgetOf is what the run spent on models against its flow's budget, and what the
// flow spent on the run's day against its day caps; nil when neither spent anything and
// the flow has no budget.
func (s *Server) budgetOf(ctx context.Context, flow string, run *store.Run) *pages.Budget {
	if s.rdb == nil {
		return nil
	}
	sp, err := s.spendOf(ctx, flow, run)
	if err != nil {
		return nil
	}
	b := sp.budget
	if b == nil && sp.run.Tokens == 0 && !sp.hasDay() {
		return nil
	}
	if b == nil {
		b = &flows.Budget{}
	}
	line := func(what, spent string, used, limit float64, limitText string) pages.BudgetLine {
		l := pages.BudgetLine{What: what, Spent: spent}
		if limit > 0 {
			l.Limit, l.Percent, l.Over = limitText, int(min(used/limit*100, 100)), used > limit
		}
		return l
	}
	lines := func(s flows.Spend, tokens int64, usd float64) []pages.BudgetLine {
		out := []pages.BudgetLine{line("tokens", fmt.Sprint(s.Tokens), float64(s.Tokens), float64(tokens), fmt.Sprint(tokens))}
		if s.USD > 0 || usd > 0 {
			out = append(out, line("dollars", fmt.Sprintf("$%.4f", s.USD), s.USD, usd, fmt.Sprintf("$%.4f", usd)))
		}
		return out
	}
	out := &pages.Budget{Lines: lines(sp.run, b.RunTokens, b.RunUSD)}
	if sp.hasDay() {
		out.Day = "on " + sp.day.Day
		if sp.day.Day == time.Now().UTC().Format(time.DateOnly) {
			out.Day = "today"
		}
		out.DayLines = lines(sp.day.Spend, b.DayTokens, b.DayUSD)
	}
	return out
}
