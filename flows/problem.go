package flows

import (
	"fmt"
	"sort"
	"strings"
)

// Severity of a problem: an error stops a flow from compiling, a warning does not.
type Severity string

const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Problem is one thing wrong with a flow document, located by node or edge and JSON path.
type Problem struct {
	Severity Severity `json:"severity"`
	Code     string   `json:"code"`
	Node     string   `json:"node,omitempty"`
	Edge     string   `json:"edge,omitempty"`
	Path     string   `json:"path"`
	Message  string   `json:"message"`
}

// Problem codes. Each names one kind of mistake; docs/flow-format.md lists them.
const (
	CodeSyntax           = "syntax"             // not JSON
	CodeTooLarge         = "too_large"          // document over the size limit
	CodeTooManyNodes     = "too_many_nodes"     // over the node limit
	CodeStringTooLong    = "string_too_long"    // a string param over the limit
	CodeUnknownField     = "unknown_field"      // a field the format does not have
	CodeMissingField     = "missing_field"      // a required field is missing
	CodeWrongType        = "wrong_type"         // a field has the wrong JSON type
	CodeInvalidValue     = "invalid_value"      // a field's value is not allowed
	CodeUnsupported      = "unsupported_format" // "sluice" is not 1
	CodeInvalidID        = "invalid_id"         // flow or node id not allowed
	CodeDuplicateID      = "duplicate_id"       // two nodes or edges share an id
	CodeUnknownType      = "unknown_type"       // no component of that type
	CodeDanglingEdge     = "dangling_edge"      // an edge names a node that does not exist
	CodeUnknownPort      = "unknown_port"       // an edge names a port the component lacks
	CodePortMismatch     = "port_type_mismatch" // an edge joins ports of different types
	CodeDuplicateEdge    = "duplicate_edge"     // the same connection twice
	CodeUnconnectedPort  = "unconnected_port"   // a required port has no edge
	CodeNoInput          = "no_input"           // no input node
	CodeMultipleInputs   = "multiple_inputs"    // more than one input node
	CodeUnreachable      = "unreachable"        // no path from the input node
	CodeCycleWithoutExit = "cycle_without_exit" // a loop nothing conditional can leave
	CodeJQSyntax         = "jq_syntax"          // a jq expression does not compile
	CodeTemplateSyntax   = "template_syntax"    // a template does not parse
	CodeInvalidDuration  = "invalid_duration"   // not a duration such as "30s"
	CodeInvalidCron      = "invalid_cron"       // a schedule's cron expression does not parse
	CodeLiteralSecret    = "literal_secret"     // a credential written into the document
	CodeSecretNotAllowed = "secret_not_allowed" // {"$env": NAME} names a variable flows may not read
	CodeJoinWithoutFork  = "join_without_fork"  // a join no fork's branches all reach
	CodeMeetWithoutJoin  = "branches_meet_without_join"
	CodeInvalidParams    = "invalid_params" // the component refused its params
)

// Problems is a list of problems with helpers.
type Problems []Problem

// HasErrors reports whether any problem is an error.
func (ps Problems) HasErrors() bool {
	for _, p := range ps {
		if p.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Errors returns only the errors.
func (ps Problems) Errors() Problems {
	var out Problems
	for _, p := range ps {
		if p.Severity == SeverityError {
			out = append(out, p)
		}
	}
	return out
}

// sortProblems orders problems by document position (path), then code, so that the same
// document always gives the same list.
func sortProblems(ps Problems) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if pa, pb := pathKey(a.Path), pathKey(b.Path); pa != pb {
			return pa < pb
		}
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Message < b.Message
	})
}

// pathKey pads array indexes so that nodes[10] sorts after nodes[9].
func pathKey(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '[' {
			j := strings.IndexByte(p[i:], ']')
			if j > 0 {
				fmt.Fprintf(&b, "[%08s]", p[i+1:i+j])
				i += j
				continue
			}
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// String formats a problem like a compiler message: node "x" params.url: message.
func (p Problem) String() string {
	var b strings.Builder
	if p.Severity == SeverityWarning {
		b.WriteString("warning: ")
	}
	if p.Node != "" {
		fmt.Fprintf(&b, "node %q ", p.Node)
	} else if p.Edge != "" {
		fmt.Fprintf(&b, "edge %q ", p.Edge)
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Message)
	fmt.Fprintf(&b, " [%s]", p.Code)
	return b.String()
}

// InvalidError is the error for a document with problems: code Invalid, carrying them all.
type InvalidError struct {
	Flow     string
	Problems Problems
}

func (e *InvalidError) Error() string {
	errs := e.Problems.Errors()
	if len(errs) == 0 {
		return "flow is invalid"
	}
	s := fmt.Sprintf("flow %q is invalid: %s", e.Flow, errs[0])
	if len(errs) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return s
}
