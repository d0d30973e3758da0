package flows

import (
	"errors"
	"fmt"
)

// Code classifies an error for its caller: the server maps each code to one HTTP status,
// the runtime decides from it whether a failed step is retried.
type Code string

const (
	Invalid      Code = "invalid"      // the request or document is wrong; do not retry
	NotFound     Code = "not_found"    // the flow, run, checkpoint or node does not exist
	Conflict     Code = "conflict"     // the thing exists but is in the wrong state
	TooLarge     Code = "too_large"    // a size limit was exceeded
	Unavailable  Code = "unavailable"  // a dependency (Redis, an upstream) is down; retry later
	Timeout      Code = "timeout"      // a deadline passed
	Internal     Code = "internal"     // a bug; the message is not shown to users
	Unsupported  Code = "unsupported"  // e.g. a wrong content type
	Forbidden    Code = "forbidden"    // refused by policy (SSRF guard, origin check)
	Unauthorized Code = "unauthorized" // no or wrong credentials
)

// Error is an error with a code and the place it concerns. Message is written for the
// user; Err, when set, is the cause and is logged but not shown for Internal errors.
type Error struct {
	Code    Code
	Flow    string
	Node    string
	Path    string // JSON path inside the document or request, e.g. "nodes[2].params.url"
	Message string
	Err     error
	// Permanent marks a step failure that retrying cannot fix: the activation goes to
	// the dead letters at once.
	Permanent bool
}

func (e *Error) Error() string {
	var s string
	if e.Flow != "" {
		s += "flow " + quote(e.Flow) + ": "
	}
	if e.Node != "" {
		s += "node " + quote(e.Node) + ": "
	}
	if e.Path != "" {
		s += e.Path + ": "
	}
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	} else if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return s + msg
}

func (e *Error) Unwrap() error { return e.Err }

func quote(s string) string { return fmt.Sprintf("%q", s) }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, Internal if there is none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Permanent wraps err so that the runtime sends the step to the dead letters without
// retrying it, like asynq's SkipRetry.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		c := *e
		c.Permanent = true
		return &c
	}
	return &Error{Code: Invalid, Err: err, Permanent: true}
}

// IsPermanent reports whether err says that retrying cannot help.
func IsPermanent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Permanent
}
