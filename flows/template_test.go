package flows_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
)

func TestTemplateRendersState(t *testing.T) {
	state := map[string]any{
		"ticket": map[string]any{"title": "Build fails", "tags": []any{"ci", "urgent"}},
		"items":  []any{"a", "b"},
		"n":      num("3"),
	}
	for _, tc := range []struct{ name, src, want string }{
		{"fields by path", "Title: {{.ticket.title}}", "Title: Build fails"},
		{"a missing key renders as nothing", "[{{.nope}}] [{{.ticket.nope}}]", "[] []"},
		{"range over a list", "{{range .items}}- {{.}}\n{{end}}", "- a\n- b\n"},
		{"json renders a value as JSON", "{{json .ticket.tags}}", `["ci","urgent"]`},
		{"join joins a list", `{{join ", " .ticket.tags}}`, "ci, urgent"},
		{"numbers as written", "n={{.n}}", "n=3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := flows.ParseTemplate(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.Execute(context.Background(), state)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if tpl.String() != tc.src {
				t.Errorf("String() = %q, want the source", tpl.String())
			}
		})
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"Hello {{.name", "template: line 1: unclosed action"},
		{"{{end}}", "template: line 1: unexpected {{end}}"},
		{"{{nosuch .x}}", `template: line 1: function "nosuch" not defined`},
	} {
		_, err := flows.ParseTemplate(tc.src)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseTemplate(%q) = %v, want %q", tc.src, err, tc.want)
		}
	}
	tpl, err := flows.ParseTemplate(`{{index .list 5}}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.Execute(context.Background(), map[string]any{"list": []any{1}}); err == nil || !strings.HasPrefix(err.Error(), "template: ") {
		t.Errorf("index out of range: got %v, want a template: error", err)
	}
}

func TestTemplateOutputIsBounded(t *testing.T) {
	tpl, err := flows.ParseTemplate(`{{range .rows}}{{.}}{{end}}`)
	if err != nil {
		t.Fatal(err)
	}
	row := strings.Repeat("x", 1<<10)
	rows := make([]any, flows.MaxTemplateOutput/len(row)+1)
	for i := range rows {
		rows[i] = row
	}
	out, err := tpl.Execute(context.Background(), map[string]any{"rows": rows})
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("rendered %d bytes without an error (%v); want the output limit", len(out), err)
	}
	out, err = tpl.Execute(context.Background(), map[string]any{"rows": rows[:len(rows)-2]})
	if err != nil || len(out) != (len(rows)-2)*len(row) {
		t.Errorf("just under the limit: %d bytes, %v", len(out), err)
	}
}

// A template that loops without writing anything stops at its deadline: the engine
// cannot interrupt a component, so the template has to notice.
func TestTemplateStopsWhenItsContextEnds(t *testing.T) {
	for _, src := range []string{
		"{{range 150000000}}{{end}}",
		"{{range $i := 100000}}{{range 100000}}{{end}}{{end}}",
		`{{define "r"}}{{range 1000}}{{end}}{{template "r" .}}{{end}}{{template "r" .}}`,
		"{{range .xs}}{{else}}{{range 150000000}}{{end}}{{end}}",
	} {
		tpl, err := flows.ParseTemplate(src)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err = tpl.Execute(ctx, map[string]any{})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: got %v, want the deadline's error", src, err)
		}
	}
}
