package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// GradeRequest asks a model whether an output meets a rubric: the model-graded
// assertion of a flow's test cases.
type GradeRequest struct {
	// Flow and Run say whose output it is: the cache's scope and the spend's owner.
	Flow, Run string
	// Provider names a configured provider ("" is DefaultProvider); Model "" is
	// DefaultGradeModel.
	Provider, Model string
	Rubric          string
	Output          any
}

// Grade is the model's verdict.
type Grade struct {
	Pass   bool        `json:"pass"`
	Reason string      `json:"reason"`
	Usage  flows.Usage `json:"usage"`
	// Cached says the verdict was given before for the same rubric and output.
	Cached bool `json:"cached,omitempty"`
}

// DefaultGradeModel grades when a graded assertion names no model.
const DefaultGradeModel = "gpt-4o-mini"

// GradeCacheTTL is how long a verdict is kept: the same rubric, model and output are
// graded once a week, so running the cases again costs nothing where nothing changed.
const GradeCacheTTL = 7 * 24 * time.Hour

const gradeSystem = `You grade the output of an automated pipeline against a rubric.
Answer with a JSON object only: {"pass": true or false, "reason": "one or two sentences saying why"}.
Pass only when the output meets every point of the rubric.`

// Grade sends the rubric and the output to the provider's model at temperature 0 and
// returns its verdict, through the tool cache (in process, and shared on Redis when the
// Env has a Cache). Grading is not charged to a flow's budget; the case's result
// reports what it cost.
func (e *Env) Grade(ctx context.Context, r GradeRequest) (*Grade, error) {
	e.init()
	if strings.TrimSpace(r.Rubric) == "" {
		return nil, &flows.Error{Code: flows.Invalid, Path: "graded.rubric", Message: "empty rubric"}
	}
	if r.Provider == "" {
		r.Provider = DefaultProvider
	}
	if r.Model == "" {
		r.Model = DefaultGradeModel
	}
	out, err := json.MarshalIndent(flows.JSONValue(r.Output), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("grade: the output is not JSON: %v", err)
	}
	zero := 0.0
	req := &chatRequest{Provider: r.Provider, Model: r.Model, Temperature: &zero, JSON: true, Messages: []chatMessage{
		{Role: "system", Content: gradeSystem},
		{Role: "user", Content: "Rubric:\n" + r.Rubric + "\n\nOutput:\n" + string(out)},
	}}
	p, err := e.providerIn(r.Flow, req.Provider)
	if err != nil {
		return nil, atPath(err, "graded.provider")
	}
	step := &flows.Step{Flow: r.Flow, Run: r.Run, Node: "grade"}
	// Only a verdict is cached: an answer that is not one is an error, asked again next time.
	compute := func(ctx context.Context) ([]byte, error) {
		reply, err := e.complete(ctx, step, p, req, "grade", false)
		if err != nil {
			return nil, err
		}
		var v struct {
			Pass   *bool  `json:"pass"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(stripFence(reply.Message.Content)), &v); err != nil || v.Pass == nil {
			return nil, fmt.Errorf("the model did not answer {\"pass\": ..., \"reason\": ...}: %s", truncateText(reply.Message.Content, 200))
		}
		return json.Marshal(Grade{Pass: *v.Pass, Reason: v.Reason, Usage: reply.Usage})
	}
	b, hit, err := e.cached(ctx, step, cacheKey("grade", "", req), GradeCacheTTL, compute)
	if err != nil {
		return nil, err
	}
	var g Grade
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("cached verdict: %v", err)
	}
	if hit {
		g.Usage, g.Cached = flows.Usage{}, true // nothing was spent this time
	}
	return &g, nil
}
