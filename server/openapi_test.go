package server_test

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/cases"
	"github.com/sluicehq/sluice/flows/engine"
	"github.com/sluicehq/sluice/flows/engine/dispatch"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// openAPISchemas are the description's schemas that Go types are the wire form of.
var openAPISchemas = map[string]any{
	"Error": server.ErrorBody{}, "Problem": flows.Problem{},
	"FlowSummary": server.FlowSummary{}, "FlowList": server.FlowList{}, "SavedFlow": server.SavedFlow{}, "Validation": server.Validation{},
	"ComponentList": server.ComponentList{}, "Started": server.Started{}, "Usage": flows.Usage{},
	"Wait": server.WaitView{}, "Run": server.RunView{}, "RunList": server.RunList{},
	"Checkpoint": store.Checkpoint{}, "CheckpointList": server.CheckpointList{}, "Change": engine.Change{}, "CheckpointDiff": server.CheckpointDiff{},
	"Consumer": store.Consumer{}, "QueueStats": store.QueueStats{}, "FlowQueues": store.FlowQueues{}, "DeadLetter": store.DeadLetter{},
	"DeadLetterList": server.DeadLetterList{}, "Retried": server.Retried{}, "StepRetry": engine.Retry{}, "RetryList": server.RetryList{}, "Moved": engine.Moved{}, "MoveList": server.MoveList{}, "Move": store.Move{}, "Comparison": engine.Comparison{}, "NodeComparison": engine.NodeComparison{}, "NodeOutcome": engine.NodeOutcome{},
	"BulkEstimate": engine.BulkEstimate{}, "BulkCreated": server.BulkCreated{}, "BulkJob": store.BulkJob{}, "BulkJobList": server.BulkJobList{}, "BulkResult": engine.BulkResult{}, "Refusal": server.Refusal{}, "BulkMoved": server.BulkMoved{}, "HookInfo": server.HookInfo{}, "FailedDelivery": store.FailedDelivery{},
	"DeliveryList": server.DeliveryList{}, "Health": server.Health{}, "Ready": server.Ready{}, "Event": store.Event{}, "ResultPayload": dispatch.ResultPayload{},
	"ToolDef": flows.ToolDef{}, "MCPToolList": server.MCPToolList{}, "Trial": engine.Trial{},
	"ImportReport": server.ImportReport{}, "VersionRuns": engine.VersionRuns{}, "Version": engine.Version{}, "VersionHistory": engine.VersionHistory{},
	"VersionDetail": engine.VersionDetail{}, "ValueChange": flows.ValueChange{}, "VersionDiff": engine.VersionDiff{},
	"RolledBack":  server.RolledBack{},
	"Environment": store.Environment{}, "EnvironmentList": server.EnvironmentList{}, "PromotionTest": store.PromotionTest{}, "Promotion": store.Promotion{},
	"EnvState": engine.EnvState{}, "FlowEnvironments": server.FlowEnvironments{}, "PromotionList": server.PromotionList{}, "Promoted": server.Promoted{},
	"CasesView": server.CasesView{}, "SavedCase": server.SavedCase{}, "Check": cases.Check{}, "CaseResult": cases.Result{},
	"TestReport": cases.Report{}, "LastResult": cases.LastResult{}, "TestSummaries": server.TestSummaries{}, "Schedule": engine.ScheduleView{}, "ScheduleList": server.ScheduleList{}, "DraftSummary": server.DraftSummary{}, "DraftSaved": server.DraftSaved{},
}

// openAPIRequests are the request bodies' schemas, with the members a request must have
// (the handler refuses it without them): what a Go type always sends says nothing there.
var openAPIRequests = map[string][]string{
	"StartRequest": nil, "ResumeRequest": nil, "ForkRequest": {"checkpoint"}, "MCPToolsRequest": {"params"},
	"ChatCompletionRequest": {"messages", "model"}, "RollbackRequest": {"version"}, "TryNodeRequest": nil,
	"RetryRequest": nil, "MoveRequest": {"version"}, "ReplayRequest": nil, "BulkReplayRequest": nil, "BulkMoveRequest": nil, "RunQuery": nil,
	"SaveCaseRequest": {"run"}, "RunCasesRequest": nil, "PromoteRequest": nil,
}

// jsonFields are a struct type's JSON members and whether each is always there (no
// omitempty or omitzero), embedded structs included.
func jsonFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			for k, v := range jsonFields(ft) {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = !slices.Contains(strings.Split(opts, ","), "omitempty") && !slices.Contains(strings.Split(opts, ","), "omitzero")
	}
	return out
}

// The OpenAPI description gives every operation an operationId, the handler's name (so a
// generated client's methods read like the API's), and every schema that a Go type is
// the wire form of lists as required the members the type always sends, and no others
// (a request body: the members its handler refuses it without).
// OPENAPI_EXPECT=1 prints what the test wants, as JSON.
func TestOpenAPIOperationIdsAndRequiredMembersFollowTheCode(t *testing.T) {
	a := newAPI(t, storetest.Embedded(t))
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(server.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{}
	handlers := a.srv.RouteHandlers()
	byHandler := map[string]int{}
	for _, h := range handlers {
		byHandler[h]++
	}
	ops := map[string]string{}
	seen := map[string]string{}
	for route, h := range handlers {
		method, path, _ := strings.Cut(route, " ")
		p := openAPIPath(path)
		raw, ok := doc.Paths[p][strings.ToLower(method)]
		if !ok {
			continue // TestOpenAPIDocumentNamesEveryRoute says so
		}
		id := h
		if byHandler[h] > 1 { // one handler for several methods: /mcp
			id += string(unicode.ToUpper(rune(method[0]))) + strings.ToLower(method[1:])
		}
		ops[strings.ToLower(method)+" "+p] = id
		var op struct {
			OperationID string `json:"operationId"`
		}
		_ = json.Unmarshal(raw, &op)
		if op.OperationID != id {
			t.Errorf("%s %s: operationId %q, want %q", method, p, op.OperationID, id)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("operationId %q of %s and %s", id, route, other)
		}
		seen[id] = route
	}
	want["operations"] = ops
	required := map[string][]string{}
	for name, v := range openAPISchemas {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s is not in openapi.json", name)
			continue
		}
		var req []string
		for f, always := range jsonFields(reflect.TypeOf(v)) {
			if _, documented := s.Properties[f]; always && documented {
				req = append(req, f)
			}
		}
		sort.Strings(req)
		got := slices.Sorted(slices.Values(s.Required))
		if !slices.Equal(got, req) && !(len(got) == 0 && len(req) == 0) {
			t.Errorf("schema %s: required %v, want %v (the members %T always sends)", name, got, req, v)
		}
		required[name] = req
	}
	for name, req := range openAPIRequests {
		got := slices.Sorted(slices.Values(doc.Components.Schemas[name].Required))
		if !slices.Equal(got, req) && !(len(got) == 0 && len(req) == 0) {
			t.Errorf("request schema %s: required %v, want %v", name, got, req)
		}
		required[name] = req
	}
	want["required"] = required
	if os.Getenv("OPENAPI_EXPECT") != "" {
		b, _ := json.MarshalIndent(want, "", " ")
		os.WriteFile(os.Getenv("OPENAPI_EXPECT"), b, 0o644)
	}
}
