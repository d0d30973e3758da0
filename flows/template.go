package flows

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// Template is a text template over the run state, in Go's text/template syntax:
// "Summarise {{.ticket.body}}" or "{{range .items}}- {{.}}\n{{end}}". Missing keys render
// as empty text. The function json renders a value as JSON.
type Template struct {
	src string
	t   *template.Template
}

var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"join": func(sep string, v []any) string {
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = fmt.Sprint(x)
		}
		return strings.Join(parts, sep)
	},
}

// tickFunc is called at the top of every range body and every template definition, so
// that a rendering can be stopped between iterations: Go's templates cannot be
// interrupted otherwise, and {{range 150000000}}{{end}} writes nothing a writer could
// refuse. Execute binds it to the step's context.
const tickFunc = "__sluice_tick"

// ParseTemplate parses a template.
func ParseTemplate(src string) (*Template, error) {
	funcs := template.FuncMap{tickFunc: func() string { return "" }}
	for k, v := range templateFuncs {
		funcs[k] = v
	}
	t, err := template.New("t").Funcs(funcs).Option("missingkey=zero").Parse(src)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "template: t:")
		return nil, fmt.Errorf("template: line %s", msg)
	}
	tick, err := template.New("tick").Funcs(funcs).Parse("{{" + tickFunc + "}}")
	if err != nil {
		return nil, err
	}
	action := tick.Tree.Root.Nodes[0]
	for _, def := range t.Templates() {
		if def.Tree == nil || def.Tree.Root == nil {
			continue
		}
		insertTicks(def.Tree.Root, action)
		def.Tree.Root.Nodes = append([]parse.Node{action.Copy()}, def.Tree.Root.Nodes...)
	}
	return &Template{src: src, t: t}, nil
}

// insertTicks puts a copy of action at the start of every range body under n.
func insertTicks(n parse.Node, action parse.Node) {
	switch x := n.(type) {
	case *parse.ListNode:
		if x == nil {
			return
		}
		for _, c := range x.Nodes {
			insertTicks(c, action)
		}
	case *parse.RangeNode:
		insertTicks(x.List, action)
		insertTicks(x.ElseList, action)
		if x.List != nil {
			x.List.Nodes = append([]parse.Node{action.Copy()}, x.List.Nodes...)
		}
	case *parse.IfNode:
		insertTicks(x.List, action)
		insertTicks(x.ElseList, action)
	case *parse.WithNode:
		insertTicks(x.List, action)
		insertTicks(x.ElseList, action)
	}
}

// MaxTemplateOutput bounds what one template renders, so a template cannot exhaust memory.
const MaxTemplateOutput = 4 << 20

type limitedBuffer struct {
	bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > MaxTemplateOutput {
		return 0, fmt.Errorf("template output is larger than %d bytes", MaxTemplateOutput)
	}
	return b.Buffer.Write(p)
}

// Execute renders the template with data (usually the state). It stops with ctx's error
// when ctx ends, between two iterations of a range or two calls of a template, and with
// an error when the output grows past MaxTemplateOutput.
func (t *Template) Execute(ctx context.Context, data any) (string, error) {
	tt, err := t.t.Clone()
	if err != nil {
		return "", fmt.Errorf("template: %v", err)
	}
	n := 0
	tt.Funcs(template.FuncMap{tickFunc: func() (string, error) {
		if n++; n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return "", fmt.Errorf("rendering stopped: %w", err)
			}
		}
		return "", nil
	}})
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("template: rendering stopped: %w", err)
	}
	var buf limitedBuffer
	if err := tt.Execute(&buf, data); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return "", fmt.Errorf("template: rendering stopped: %w", cerr)
		}
		return "", fmt.Errorf("template: %v", err)
	}
	return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
}

// String is the template's source.
func (t *Template) String() string { return t.src }
