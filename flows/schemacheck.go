package flows

import (
	"bytes"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SchemaProblems validates the JSON document raw against schema s (compiled with
// CompileSchema) and returns every problem, each at its JSON path: what other file
// formats beside the flow document (a flow's test cases) check themselves with.
func SchemaProblems(s *jsonschema.Schema, raw []byte) Problems {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return Problems{{Severity: SeverityError, Code: CodeSyntax, Message: "not JSON: " + err.Error()}}
	}
	if err := s.Validate(v); err != nil {
		return schemaProblems(err, nil)
	}
	return nil
}
