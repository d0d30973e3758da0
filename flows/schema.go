package flows

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed document.schema.json
var documentSchemaJSON []byte

// DocumentSchema is the JSON Schema of a flow document.
func DocumentSchema() json.RawMessage { return documentSchemaJSON }

var documentSchema = mustCompileSchema("document", documentSchemaJSON)

// envRefSchema is what a secret param must be: a reference to an environment variable.
var envRefSchema = map[string]any{
	"type":                 "object",
	"required":             []any{"$env"},
	"additionalProperties": false,
	"properties": map[string]any{
		"$env": map[string]any{"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
			"description": "Name of the environment variable that holds the secret."},
	},
}

type paramInfo struct {
	secrets []string
	// secretKeys are object params whose members named like a credential take only an
	// env reference ("x-secret-keys": a regular expression of the member names).
	secretKeys map[string]*regexp.Regexp
	defaults   map[string]json.RawMessage
	// published is the schema as the editor and the docs see it: the secret properties
	// carry the env-reference schema, everything else is as written, in its order.
	published json.RawMessage
}

// compileParamSchema compiles a component's params schema. Properties marked
// "x-secret": true are given the env-reference schema; an object property's
// "x-secret-keys" (a regular expression) names its members that are credentials;
// top-level "default"s are kept.
func compileParamSchema(name string, raw json.RawMessage) (*jsonschema.Schema, paramInfo, error) {
	var info paramInfo
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, info, err
	}
	if props, ok := doc["properties"].(map[string]any); ok {
		info.defaults = map[string]json.RawMessage{}
		for k, v := range props {
			p, ok := v.(map[string]any)
			if !ok {
				continue
			}
			if p["x-secret"] == true {
				info.secrets = append(info.secrets, k)
				for kk, vv := range envRefSchema {
					p[kk] = vv
				}
			}
			if expr, ok := p["x-secret-keys"]; ok {
				str, _ := expr.(string)
				re, err := regexp.Compile(str)
				if err != nil || str == "" {
					return nil, info, fmt.Errorf("property %s: x-secret-keys must be a regular expression: %v", k, expr)
				}
				if info.secretKeys == nil {
					info.secretKeys = map[string]*regexp.Regexp{}
				}
				info.secretKeys[k] = re
			}
			if d, ok := p["default"]; ok {
				b, _ := json.Marshal(d)
				info.defaults[k] = b
			}
		}
		sort.Strings(info.secrets)
	}
	rewritten, err := json.Marshal(doc)
	if err != nil {
		return nil, info, err
	}
	sch, err := compileSchema(name, rewritten)
	if err != nil {
		return nil, info, err
	}
	info.published = raw
	if len(info.secrets) > 0 {
		props := doc["properties"].(map[string]any)
		info.published, err = replaceProperties(raw, func(k string) (any, bool) {
			p, ok := props[k].(map[string]any)
			return p, ok && p["x-secret"] == true
		})
		if err != nil {
			return nil, info, err
		}
	}
	return sch, info, nil
}

// replaceProperties returns the schema raw with the properties for which repl says so
// replaced, keeping every key in the order it is written (the editor's parameter form
// follows that order).
func replaceProperties(raw json.RawMessage, repl func(key string) (any, bool)) (json.RawMessage, error) {
	top, err := orderedMembers(raw)
	if err != nil {
		return nil, err
	}
	for i, m := range top {
		if m.key != "properties" {
			continue
		}
		props, err := orderedMembers(m.val)
		if err != nil {
			return nil, err
		}
		for j, p := range props {
			if v, ok := repl(p.key); ok {
				if props[j].val, err = json.Marshal(v); err != nil {
					return nil, err
				}
			}
		}
		top[i].val = encodeMembers(props)
	}
	return encodeMembers(top), nil
}

type member struct {
	key string
	val json.RawMessage
}

// orderedMembers reads a JSON object's members in the order they are written.
func orderedMembers(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{key: t.(string), val: v})
	}
	return out, nil
}

func encodeMembers(ms []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.RegisterFormat(&jsonschema.Format{Name: "jq", Validate: func(v any) error {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		_, err := CompileJQ(s)
		return err
	}})
	c.RegisterFormat(&jsonschema.Format{Name: "template", Validate: func(v any) error {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		_, err := ParseTemplate(s)
		return err
	}})
	c.RegisterFormat(&jsonschema.Format{Name: "duration", Validate: func(v any) error {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		_, err := parseDuration(s)
		return err
	}})
	c.RegisterFormat(&jsonschema.Format{Name: "cron", Validate: func(v any) error {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		_, err := ParseCron(s, "")
		return err
	}})
	c.RegisterFormat(&jsonschema.Format{Name: "timezone", Validate: func(v any) error {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		_, err := loadTimezone(s)
		return err
	}})
	c.RegisterFormat(&jsonschema.Format{Name: "json-schema", Validate: func(v any) error {
		if _, ok := v.(map[string]any); !ok {
			return nil
		}
		b, _ := json.Marshal(v)
		_, err := CompileSchema(b)
		return err
	}})
	return c
}

func compileSchema(name string, raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := newCompiler()
	url := "mem://sluice/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// CompileSchema compiles a user-supplied JSON Schema (such as an input node's schema).
func CompileSchema(raw []byte) (*jsonschema.Schema, error) {
	sch, err := compileSchema("user", raw)
	if err != nil {
		return nil, schemaCompileError(err)
	}
	return sch, nil
}

func schemaCompileError(err error) error {
	var se *jsonschema.SchemaValidationError
	if errors.As(err, &se) {
		return fmt.Errorf("not a valid JSON Schema: %s", leafMessages(se.Err))
	}
	return fmt.Errorf("not a valid JSON Schema: %v", err)
}

func leafMessages(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var msgs []string
	for _, l := range leaves(ve) {
		msgs = append(msgs, jsonPath(l.InstanceLocation)+": "+l.ErrorKind.LocalizedString(printer))
	}
	return strings.Join(msgs, "; ")
}

func mustCompileSchema(name string, raw []byte) *jsonschema.Schema {
	s, err := compileSchema(name, raw)
	if err != nil {
		panic(fmt.Sprintf("flows: %s schema: %v", name, err))
	}
	return s
}

var printer = message.NewPrinter(language.English)

// leaves returns the innermost errors of a validation error tree: the ones that say
// what is wrong, not which group of keywords failed.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	// The causes of a propertyNames error validate the name as a value of its own and
	// so have lost where it is; the error itself knows the object and the name.
	if _, names := e.ErrorKind.(*kind.PropertyNames); len(e.Causes) == 0 || names {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// schemaProblems turns a validation error into problems. prefix is the JSON path of the
// validated value inside the document (e.g. "nodes[2].params").
func schemaProblems(err error, prefix []string) []Problem {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Problem{{Severity: SeverityError, Code: CodeWrongType, Path: jsonPath(prefix), Message: err.Error()}}
	}
	var out []Problem
	seen := map[string]bool{}
	for _, l := range leaves(ve) {
		loc := append(append([]string(nil), prefix...), l.InstanceLocation...)
		p := Problem{Severity: SeverityError, Path: jsonPath(loc), Message: l.ErrorKind.LocalizedString(printer)}
		switch k := l.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			p.Code = CodeUnknownField
			for _, prop := range k.Properties {
				q := p
				q.Path = jsonPath(append(loc, prop))
				q.Message = fmt.Sprintf("unknown field %q", prop)
				out = append(out, q)
			}
			continue
		case *kind.Required:
			p.Code = CodeMissingField
			for _, prop := range k.Missing {
				q := p
				q.Path = jsonPath(append(loc, prop))
				q.Message = fmt.Sprintf("missing required field %q", prop)
				out = append(out, q)
			}
			continue
		case *kind.PropertyNames:
			p.Code = CodeInvalidValue
			p.Path = jsonPath(append(loc, k.Property))
			var why []string
			for _, c := range l.Causes {
				for _, cl := range leaves(c) {
					why = append(why, cl.ErrorKind.LocalizedString(printer))
				}
			}
			p.Message = fmt.Sprintf("%q is not allowed as a name here: %s", k.Property, strings.Join(why, "; "))
		case *kind.Type:
			p.Code = CodeWrongType
			p.Message = fmt.Sprintf("is %s, want %s", k.Got, strings.Join(k.Want, " or "))
		case *kind.Format:
			switch k.Want {
			case "jq":
				p.Code = CodeJQSyntax
			case "template":
				p.Code = CodeTemplateSyntax
			case "duration":
				p.Code = CodeInvalidDuration
			case "cron":
				p.Code = CodeInvalidCron
			default:
				p.Code = CodeInvalidValue
			}
			p.Message = fmt.Sprintf("not a valid %s: %v", k.Want, k.Err)
			if k.Want == "json-schema" {
				p.Message = k.Err.Error() // it says "not a valid JSON Schema" itself
			}
		default:
			p.Code = CodeInvalidValue
		}
		key := p.Code + "|" + p.Path + "|" + p.Message
		if !seen[key] {
			seen[key] = true
			out = append(out, p)
		}
	}
	return out
}

// jsonPath writes a location as nodes[2].params.url.
func jsonPath(loc []string) string {
	var b strings.Builder
	for _, s := range loc {
		if _, err := strconv.Atoi(s); err == nil {
			b.WriteString("[" + s + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}
