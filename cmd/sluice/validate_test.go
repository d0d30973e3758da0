package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/examples"
)

// sluice runs the built binary with stdin and returns its stdout, stderr and exit code.
func sluice(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sluice %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// writeFlow writes a flow file into dir and returns its path.
func writeFlow(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// broken has one problem of each kind of place: the document, a node, an edge, and a
// warning.
const broken = `{"sluice": 1, "id": "broken", "author": "ada",
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "shout", "type": "transform", "params": {"expr": "{x: "}},
  {"id": "draft", "type": "transform", "params": {"expr": "{}"}},
  {"id": "out", "type": "output"}],
 "edges": [{"from": "in", "to": "shout"}, {"from": "shout", "to": "out"}, {"from": "shout", "to": "ghost"}]}`

func TestValidatePrintsEveryProblemLikeACompiler(t *testing.T) {
	file := writeFlow(t, t.TempDir(), "broken.json", broken)
	stdout, stderr, code := sluice(t, "", "validate", file)
	// In document order: top-level fields, then edges, then nodes, as the paths sort.
	want := file + `: author: unknown field "author" [unknown_field]
` + file + `: edge "shout:out->ghost:in" edges[2].to: no node "ghost" [dangling_edge]
` + file + `: node "shout" nodes[1].params.expr: not a valid jq: jq: unexpected EOF [jq_syntax]
` + file + `: warning: node "draft" nodes[2]: no path from the input node "in" reaches this node, so it never runs [unreachable]
`
	if stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, want)
	}
	if code != 1 {
		t.Errorf("exit %d, want 1 for a file with errors", code)
	}
	if !strings.Contains(stderr, "3 errors in 1 of 1 file") {
		t.Errorf("stderr %q does not sum up the errors", stderr)
	}
}

func TestValidateExamplesPassSilently(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, id := range examples.IDs() {
		data, err := examples.Read(id)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, writeFlow(t, dir, id+".json", string(data)))
	}
	stdout, stderr, code := sluice(t, "", append([]string{"validate"}, files...)...)
	if code != 0 || stdout != "" || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 0 and no output", code, stdout, stderr)
	}
}

func TestValidateWarningsAloneExitZero(t *testing.T) {
	file := writeFlow(t, t.TempDir(), "lonely.json", `{"sluice": 1, "id": "lonely",
	 "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}, {"id": "spare", "type": "output"}],
	 "edges": [{"from": "in", "to": "out"}, {"from": "spare", "port": "x", "to": "out"}]}`)
	// spare's edge is wrong: an error. Without it, spare is only unreachable.
	_, _, code := sluice(t, "", "validate", file)
	if code != 1 {
		t.Fatalf("exit %d for an unknown port, want 1", code)
	}
	file = writeFlow(t, t.TempDir(), "lonely.json", `{"sluice": 1, "id": "lonely",
	 "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}, {"id": "draft", "type": "transform", "params": {"expr": "{}"}}],
	 "edges": [{"from": "in", "to": "out"}]}`)
	stdout, _, code := sluice(t, "", "validate", file)
	if code != 0 {
		t.Errorf("exit %d with only warnings, want 0", code)
	}
	if !strings.HasPrefix(stdout, file+`: warning: node "draft" nodes[2]: `) || strings.Count(stdout, "\n") != 1 {
		t.Errorf("stdout %q, want the one warning", stdout)
	}
}

func TestValidateJSON(t *testing.T) {
	dir := t.TempDir()
	good := writeFlow(t, dir, "good.json", `{"sluice": 1, "id": "good", "nodes": [{"id": "in", "type": "input"}, {"id": "out", "type": "output"}], "edges": [{"from": "in", "to": "out"}]}`)
	bad := writeFlow(t, dir, "bad.json", broken)
	stdout, _, code := sluice(t, "", "validate", "--json", good, bad)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var got []struct {
		File     string         `json:"file"`
		Problems flows.Problems `json:"problems"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout is not a JSON array: %v\n%s", err, stdout)
	}
	if len(got) != 2 || got[0].File != good || got[1].File != bad {
		t.Fatalf("got %+v, want one entry per file in argument order", got)
	}
	if got[0].Problems == nil || len(got[0].Problems) != 0 || !strings.Contains(stdout, `"problems": []`) {
		t.Errorf("a clean file must have \"problems\": [], got %s", stdout)
	}
	ps := got[1].Problems
	if len(ps) != 4 || len(ps.Errors()) != 3 {
		t.Fatalf("bad.json problems: %+v", ps)
	}
	if p := ps[2]; p.Code != flows.CodeJQSyntax || p.Node != "shout" || p.Path != "nodes[1].params.expr" || p.Severity != flows.SeverityError {
		t.Errorf("third problem %+v, want the jq error on node shout", p)
	}
	if p := ps[1]; p.Edge != "shout:out->ghost:in" || p.Path != "edges[2].to" {
		t.Errorf("second problem %+v, want the dangling edge", p)
	}
}

func TestValidateReadsStandardInput(t *testing.T) {
	stdout, _, code := sluice(t, `{"sluice": 1, "id": "x", "nodes": [], "edges": [],}`, "validate", "-")
	if code != 1 || !strings.HasPrefix(stdout, "<stdin>: not valid JSON: line 1, column ") || !strings.HasSuffix(stdout, " [syntax]\n") {
		t.Errorf("exit %d, stdout %q; want one syntax error labelled <stdin>", code, stdout)
	}
}

func TestValidateUsageErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	bad := writeFlow(t, dir, "bad.json", broken)
	for _, tc := range []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"no files", []string{"validate"}, "give at least one flow file"},
		{"an unknown flag", []string{"validate", "--strict", bad}, "flag provided but not defined: -strict"},
		{"a file that does not exist", []string{"validate", filepath.Join(dir, "nope.json")}, "no such file"},
		{"a directory", []string{"validate", dir}, "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := sluice(t, "", tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.wantStderr) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.wantStderr)
			}
		})
	}
	// The files that can be read are still checked.
	stdout, stderr, code := sluice(t, "", "validate", filepath.Join(dir, "nope.json"), bad)
	if code != 2 || strings.Count(stdout, bad+": ") != 4 || !strings.Contains(stderr, "1 file could not be read; 3 errors in 1 of 2 files") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, _, code := sluice(t, "", "validate", "--help"); code != 0 {
		t.Errorf("validate --help: exit %d, want 0", code)
	}
}

func TestComponentsJSONListsTheRegistry(t *testing.T) {
	stdout, _, code := sluice(t, "", "components", "--json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var specs []struct {
		Name       string          `json:"name"`
		Category   string          `json:"category"`
		Ports      []flows.Port    `json:"ports"`
		RoutePorts string          `json:"route_ports"`
		Params     json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal([]byte(stdout), &specs); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	byName := map[string]int{}
	for i, s := range specs {
		byName[s.Name] = i
		if !json.Valid(s.Params) || !bytes.HasPrefix(s.Params, []byte("{")) {
			t.Errorf("%s: params schema %s", s.Name, s.Params)
		}
	}
	for _, want := range []string{"input", "output", "transform", "router", "fanout", "join"} {
		if _, ok := byName[want]; !ok {
			t.Errorf("%s is not listed", want)
		}
	}
	if r := specs[byName["router"]]; r.RoutePorts != "routes" {
		t.Errorf("router route_ports %q, want routes", r.RoutePorts)
	}
	if specs[0].Category != "io" {
		t.Errorf("first component is in %q; the palette starts with io", specs[0].Category)
	}
}

func TestComponentsMarkdownDocumentsEveryComponent(t *testing.T) {
	stdout, _, code := sluice(t, "", "components", "--markdown")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		"# Components\n",
		"| [Fan-out](#fan-out) | `fanout` | flow |",
		"## Router\n\nType `router`, category `flow`.",
		"| *each key of `routes`* | out | state |",
		"| `items` | string (jq) | `\".items\"` |  | jq producing the list to fan out over. |",
		"| `max_items` | integer, 1 to 10000 | `1000` |",
		"| `expr` | string (jq) |  | yes |",
		"| `in` | in | state | yes | the branches (takes several edges) |",
		"```json\n{\n  \"items\": \".documents\",\n  \"as\": \"document\"\n}\n```",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the Markdown lacks %q", want)
		}
	}
	for _, name := range []string{"Input", "Output", "Transform", "Router", "Fan-out", "Join"} {
		if !strings.Contains(stdout, "\n## "+name+"\n") {
			t.Errorf("no section for %s", name)
		}
	}
}

func TestComponentsTextAndUsage(t *testing.T) {
	stdout, _, code := sluice(t, "", "components")
	if code != 0 || !strings.HasPrefix(stdout, "COMPONENT") || !strings.Contains(stdout, "router        flow      in → default, each of routes") {
		t.Errorf("exit %d, stdout:\n%s", code, stdout)
	}
	if _, _, code := sluice(t, "", "components", "--markdown", "--json"); code != 2 {
		t.Errorf("--markdown --json: exit %d, want 2", code)
	}
	if _, _, code := sluice(t, "", "components", "extra"); code != 2 {
		t.Errorf("an argument: exit %d, want 2", code)
	}
	_, stderr, _ := sluice(t, "", "--help")
	for _, c := range []string{"validate", "components"} {
		if !strings.Contains(stderr, "  "+c+" ") {
			t.Errorf("--help does not list %s:\n%s", c, stderr)
		}
	}
}
