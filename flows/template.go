package flows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
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

// ParseTemplate parses a template.
func ParseTemplate(src string) (*Template, error) {
	t, err := template.New("t").Funcs(templateFuncs).Option("missingkey=zero").Parse(src)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "template: t:")
		return nil, fmt.Errorf("template: line %s", msg)
	}
	return &Template{src: src, t: t}, nil
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

// Execute renders the template with data (usually the state).
func (t *Template) Execute(data any) (string, error) {
	var buf limitedBuffer
	if err := t.t.Execute(&buf, data); err != nil {
		return "", fmt.Errorf("template: %v", err)
	}
	return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
}

// String is the template's source.
func (t *Template) String() string { return t.src }
