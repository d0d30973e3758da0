package flows_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

func TestProblemReadsLikeACompilerMessage(t *testing.T) {
	for _, tc := range []struct {
		p    flows.Problem
		want string
	}{
		{flows.Problem{Severity: flows.SeverityError, Code: "jq_syntax", Node: "x", Path: "nodes[1].params.expr", Message: "jq: unexpected EOF"},
			`node "x" nodes[1].params.expr: jq: unexpected EOF [jq_syntax]`},
		{flows.Problem{Severity: flows.SeverityError, Code: "dangling_edge", Edge: "a:out->b:in", Path: "edges[0].to", Message: `no node "b"`},
			`edge "a:out->b:in" edges[0].to: no node "b" [dangling_edge]`},
		{flows.Problem{Severity: flows.SeverityWarning, Code: "unreachable", Node: "x", Path: "nodes[2]", Message: "never runs"},
			`warning: node "x" nodes[2]: never runs [unreachable]`},
		{flows.Problem{Severity: flows.SeverityError, Code: "syntax", Message: "not valid JSON"},
			`not valid JSON [syntax]`},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

func TestProblemsAreInDocumentOrder(t *testing.T) {
	// Eleven nodes with a bad id each: nodes[10] must come after nodes[9], not after
	// nodes[1] as a plain string sort would put it.
	var nodes []string
	for i := range 11 {
		nodes = append(nodes, fmt.Sprintf(`{"id": "N%d", "type": "input"}`, i))
	}
	doc := `{"sluice": 1, "id": "x", "nodes": [` + strings.Join(nodes, ",") + `], "edges": []}`
	_, ps := flows.Compile([]byte(doc), testRegistry(), flows.DefaultLimits)
	var ids []string
	for _, p := range ps {
		if p.Code == flows.CodeInvalidID {
			ids = append(ids, p.Node)
		}
	}
	if got := strings.Join(ids, " "); got != "N0 N1 N2 N3 N4 N5 N6 N7 N8 N9 N10" {
		t.Errorf("invalid_id problems in order %s", got)
	}
	for i := 1; i < len(ps); i++ {
		if ps[i-1].Path == ps[i].Path && ps[i-1].Code > ps[i].Code {
			t.Errorf("problems at %s not ordered by code: %s, %s", ps[i].Path, ps[i-1].Code, ps[i].Code)
		}
	}
}

func TestValidateListsEveryProblemAtOnce(t *testing.T) {
	doc := `{"sluice": 1, "id": "x", "nodes": [
		{"id": "in", "type": "input"},
		{"id": "a", "type": "transform", "params": {"expr": ".["}},
		{"id": "b", "type": "nosuch"},
		{"id": "out", "type": "output"}],
	  "edges": [{"from": "in", "to": "a"}, {"from": "a", "to": "out", "condition": "=="}, {"from": "in", "to": "ghost"}]}`
	ps := flows.Validate([]byte(doc), testRegistry(), flows.DefaultLimits)
	got := map[string]bool{}
	for _, p := range ps.Errors() {
		got[p.Code+" "+p.Path] = true
	}
	for _, want := range []string{
		"jq_syntax nodes[1].params.expr", "unknown_type nodes[2].type",
		"jq_syntax edges[1].condition", "dangling_edge edges[2].to",
	} {
		if !got[want] {
			t.Errorf("missing %s in:\n%s", want, problemLines(ps))
		}
	}
	if len(ps.Errors()) != 4 {
		t.Errorf("want exactly those 4 errors, got:\n%s", problemLines(ps))
	}
}

func TestCompileNeverPanicsWithoutADocument(t *testing.T) {
	for _, data := range []string{"", "null", "[]", "42", `"text"`, "{}", `{"sluice": 1}`, `{"nodes": [null, 1, "x"], "edges": [null]}`} {
		plan, ps := flows.Compile([]byte(data), testRegistry(), flows.DefaultLimits)
		if plan != nil || !ps.HasErrors() {
			t.Errorf("%q: plan %v, problems %v; want no plan and an error", data, plan != nil, ps)
		}
		for _, p := range ps {
			if strings.Contains(p.Message, "internal error") {
				t.Errorf("%q: %s", data, p)
			}
		}
	}
}

func TestInvalidErrorSummarisesTheErrors(t *testing.T) {
	_, ps := flows.Compile([]byte(`{"sluice": 1, "id": "x", "nodes": [{"id": "A", "type": "nosuch"}], "edges": []}`),
		testRegistry(), flows.DefaultLimits)
	err := error(&flows.InvalidError{Flow: "x", Problems: ps})
	msg := err.Error()
	if !strings.HasPrefix(msg, `flow "x" is invalid: nodes: the flow has no input node`) || !strings.HasSuffix(msg, "(and 2 more)") {
		t.Errorf("message %q", msg)
	}
	var ie *flows.InvalidError
	if !errors.As(err, &ie) || len(ie.Problems.Errors()) != 3 {
		t.Errorf("errors: %v", ps)
	}
}

func TestErrorCodesAndPermanence(t *testing.T) {
	e := &flows.Error{Code: flows.NotFound, Flow: "f", Node: "n", Path: "params.url", Message: "gone", Err: errors.New("cause")}
	if got := e.Error(); got != `flow "f": node "n": params.url: gone: cause` {
		t.Errorf("Error() = %q", got)
	}
	wrapped := fmt.Errorf("step: %w", e)
	if flows.ErrorCode(wrapped) != flows.NotFound {
		t.Errorf("ErrorCode through a wrap = %s", flows.ErrorCode(wrapped))
	}
	if flows.ErrorCode(errors.New("plain")) != flows.Internal {
		t.Error("a plain error is not Internal")
	}
	if flows.IsPermanent(wrapped) {
		t.Error("an error is permanent before Permanent is applied")
	}
	p := flows.Permanent(wrapped)
	if !flows.IsPermanent(p) || flows.ErrorCode(p) != flows.NotFound {
		t.Errorf("Permanent(%v): permanent %v, code %s", wrapped, flows.IsPermanent(p), flows.ErrorCode(p))
	}
	if e.Permanent {
		t.Error("Permanent changed the error it was given")
	}
	plain := flows.Permanent(errors.New("bad input"))
	if !flows.IsPermanent(plain) || flows.ErrorCode(plain) != flows.Invalid || !strings.Contains(plain.Error(), "bad input") {
		t.Errorf("Permanent(plain) = %v", plain)
	}
	if flows.Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
}
