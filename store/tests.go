package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

// TestResultTTL is how long the whole result of a version's last test (every case's
// output and node outputs) is kept; its summary stays as long as the version history.
const TestResultTTL = 7 * 24 * time.Hour

// SaveTestResult records the last test result of a flow's version: the summary in the
// flow's hash of results, the whole result for TestResultTTL. Both keys carry the
// flow's tag, so the transaction is one slot.
func (r *Redis) SaveTestResult(ctx context.Context, flow, version string, summary, whole json.RawMessage) error {
	k := FlowKeys(flow)
	pipe := r.Client.TxPipeline()
	pipe.HSet(ctx, k.TestResults(), version, string(summary))
	pipe.Set(ctx, k.TestResult(version), string(whole), TestResultTTL)
	_, err := pipe.Exec(ctx)
	return err
}

// TestSummaries returns the summary of each version's last test result, by version.
func (r *Redis) TestSummaries(ctx context.Context, flow string) (map[string]json.RawMessage, error) {
	all, err := r.Client.HGetAll(ctx, FlowKeys(flow).TestResults()).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(all))
	for v, s := range all {
		out[v] = json.RawMessage(s)
	}
	return out, nil
}

// TestResult returns the whole last test result of a version; NotFound when there is
// none or it has expired.
func (r *Redis) TestResult(ctx context.Context, flow, version string) (json.RawMessage, error) {
	s, err := r.Client.Get(ctx, FlowKeys(flow).TestResult(version)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no test result of version %.12s in the last %s", version, TestResultTTL)}
	}
	if err != nil {
		return nil, err
	}
	return json.RawMessage(s), nil
}
