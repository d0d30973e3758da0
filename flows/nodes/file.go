package nodes

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/flows"
)

// Files keeps the files runs take by reference (store.Files: small ones in Redis, large
// ones in an S3-compatible object store). A missing or expired file is an error with
// code flows.NotFound.
type Files interface {
	// Put keeps a file for flow's runs.
	Put(ctx context.Context, flow, name, contentType string, data []byte) (flows.FileInfo, error)
	// Open returns a file of flow and its bytes.
	Open(ctx context.Context, flow, id string) (flows.FileInfo, []byte, error)
}

func fileSpec(env *Env) flows.Spec {
	return flows.Spec{
		Name:     "file",
		Title:    "Read file",
		Category: "data",
		Description: "Reads the text of files a run was given by reference ({\"$file\": ID, ...}, as an upload through " +
			"POST /api/flows/FLOW/files or the editor answers): PDF, DOCX, HTML (the main content, as a reader view shows " +
			"it), Markdown, CSV (one line per record, \"header: value; …\", the records also as rows), JSON (also parsed, " +
			"as data) and plain text. The file itself never enters the state: only its text does, as a list of documents " +
			"{name, format, title, text, pages, file, …} stored under \"as\", which split_text takes.",
		Ports: []flows.Port{inPort, outPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"file": {"type": "string", "format": "jq", "default": ".file", "description": "jq making the file reference, or a list of them, e.g. .files"},
				"max_chars": {"type": "integer", "minimum": 1, "maximum": 67108864, "default": 1000000, "description": "A document whose text is longer fails the step: split the work (a fanout over the files) or raise it with the flow's max_state_bytes."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "documents", "description": "State key the documents are stored under."}
			}
		}`),
		Example: json.RawMessage(`{"file": ".files", "as": "documents"}`),
		New:     func(b *flows.Build) (flows.Component, error) { return newFile(env, b) },
	}
}

// File reads uploaded files as text.
type File struct {
	env  *Env
	file *flows.JQ
	max  int
	as   string
}

func newFile(env *Env, b *flows.Build) (flows.Component, error) {
	var p struct {
		File     string `json:"file"`
		MaxChars int    `json:"max_chars"`
		As       string `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	q, err := flows.CompileJQ(p.File)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.file", Err: err}
	}
	return &File{env: env, file: q, max: p.MaxChars, as: p.As}, nil
}

// Run opens every file the expression names and extracts its text.
func (f *File) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	if f.env.Files == nil {
		return nil, noRedis(s.Node, "reading files")
	}
	bad := func(msg string) error {
		return flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.file", Message: msg})
	}
	v, err := f.file.First(ctx, s.Input, s.State)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.file", Err: err})
	}
	refs, ok := v.([]any)
	if !ok {
		refs = []any{v}
	}
	docs := make([]any, 0, len(refs))
	for i, ref := range refs {
		id, ok := flows.FileRefID(ref)
		if !ok {
			return nil, bad(fmt.Sprintf("item %d is %s, not a file reference {\"$file\": ID}: upload the file (POST /api/flows/%s/files) and pass what it answers", i, flows.TypeName(ref), s.Flow))
		}
		info, data, err := f.env.Files.Open(ctx, s.Flow, id)
		if err != nil {
			if flows.ErrorCode(err) == flows.NotFound {
				return nil, flows.Permanent(&flows.Error{Code: flows.NotFound, Node: s.Node, Path: "params.file", Message: fmt.Sprintf("file %s: %v", id, err)})
			}
			return nil, err
		}
		doc, err := extract(info.Name, info.ContentType, data, nil)
		if err != nil {
			return nil, bad(fmt.Sprintf("file %s (%s): %v", id, info.Name, err))
		}
		if n := len([]rune(doc.Text)); n > f.max {
			return nil, flows.Permanent(&flows.Error{Code: flows.TooLarge, Node: s.Node, Path: "params.max_chars",
				Message: fmt.Sprintf("file %s (%s) has %d characters of text, more than max_chars (%d)", id, info.Name, n, f.max)})
		}
		out := documentValue(doc)
		out["file"] = id
		out["size"] = info.Size
		docs = append(docs, out)
	}
	return &flows.Result{Output: docs, Update: map[string]any{f.as: docs}}, nil
}

// documentValue is a document as the state holds it (plain JSON values).
func documentValue(d *document) map[string]any {
	b, _ := json.Marshal(d)
	v, _ := flows.DecodeJSON(b)
	m, _ := v.(map[string]any)
	return m
}

var _ flows.Component = (*File)(nil)
