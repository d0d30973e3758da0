package langflow

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
)

// Escaped text prints as itself, alone and on either side of an action: no brace of
// it, however arranged, opens an action or joins the one beside it.
func FuzzEscapedTextPrintsAsItself(f *testing.F) {
	for _, s := range []string{"", "{", "}", "{{", "}}", "{{{", "{{.secret}}", "{{json .}}", "{{{{json .}}}}",
		`{{define "x"}}{{end}}{{template "x"}}`, "{{- .x -}}", "{{/* c */}}", "a{", "{ {", "}{", "{{\"{{\"}}", "{{{ }}} {{"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, before, after string) {
		if strings.Contains(before+after, "<no value>") {
			t.Skip("flows.Template drops the text <no value> from what it renders (Go's mark of a missing key)")
		}
		src := escapeTemplate(before) + "{{.x}}" + escapeTemplate(after)
		tpl, err := flows.ParseTemplate(src)
		if err != nil {
			t.Fatalf("%q and %q escape to %q, which does not parse: %v", before, after, src, err)
		}
		got, err := tpl.Execute(context.Background(), map[string]any{"x": "X", "secret": "LEAK"})
		if err != nil || got != before+"X"+after {
			t.Fatalf("%q renders %q (%v), want %q", src, got, err, before+"X"+after)
		}
	})
}
