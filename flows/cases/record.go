package cases

import (
	"context"
	"encoding/json"
	"time"
)

// Report is a test of one version: when, the totals and each case's result.
type Report struct {
	Summary
	Flow string    `json:"flow"`
	At   time.Time `json:"at"`
	// Draft says the version tested was a working copy, not a saved version.
	Draft   bool     `json:"draft,omitempty"`
	Results []Result `json:"results"`
}

// NewReport totals results of flow's version.
func NewReport(flow, version string, rs []Result) *Report {
	return &Report{Summary: Summarize(version, rs), Flow: flow, At: time.Now().UTC(), Results: rs}
}

// Verdict is one case's line in a version's last result.
type Verdict struct {
	Case string `json:"case"`
	Pass bool   `json:"pass"`
	Why  string `json:"why,omitempty"`
}

// LastResult is what the version history keeps of a version's last test.
type LastResult struct {
	Summary
	At       time.Time `json:"at"`
	Draft    bool      `json:"draft,omitempty"`
	Verdicts []Verdict `json:"verdicts"`
}

// Last is the report as the version history keeps it.
func (r *Report) Last() LastResult {
	l := LastResult{Summary: r.Summary, At: r.At, Draft: r.Draft, Verdicts: []Verdict{}}
	for _, c := range r.Results {
		l.Verdicts = append(l.Verdicts, Verdict{Case: c.Case, Pass: c.Pass, Why: c.Why})
	}
	return l
}

// ResultStore keeps each version's last test result (store.Redis).
type ResultStore interface {
	SaveTestResult(ctx context.Context, flow, version string, summary, whole json.RawMessage) error
}

// Record keeps the report as its version's last test result.
func Record(ctx context.Context, s ResultStore, r *Report) error {
	sum, err := json.Marshal(r.Last())
	if err != nil {
		return err
	}
	whole, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.SaveTestResult(ctx, r.Flow, r.Version, sum, whole)
}
