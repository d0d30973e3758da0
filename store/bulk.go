package store

// Bulk replay jobs: which runs a job replays, what each gave, its status and who works
// on it (see flows/engine/bulk.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
)

var (
	bulkDoneScript  = mustScript("bulk_done")
	bulkLeaseScript = mustScript("bulk_lease")
)

// Bulk job statuses.
const (
	JobRunning   = "running"
	JobDone      = "done"
	JobCancelled = "cancelled"
)

// BulkJob is a bulk replay job as the store keeps it.
type BulkJob struct {
	ID       string          `json:"id"`
	Flow     string          `json:"flow"`
	Status   string          `json:"status"`
	Spec     json.RawMessage `json:"spec"`
	Total    int             `json:"total"`
	Done     int             `json:"done"`
	Failed   int             `json:"failed"`
	Skipped  int             `json:"skipped"`
	Created  time.Time       `json:"created_at"`
	Updated  time.Time       `json:"updated_at"`
	Finished *time.Time      `json:"finished_at,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// CreateBulkJob stores a new job with the runs it replays.
func (r *Redis) CreateBulkJob(ctx context.Context, flow, job string, spec []byte, runs []string) error {
	k := FlowKeys(flow)
	now := nowMS()
	_, err := r.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k.ReplayJob(job), "status", JobRunning, "spec", string(spec), "total", len(runs), "done", 0, "failed", 0, "skipped", 0,
			"created_at", now, "updated_at", now)
		if len(runs) > 0 {
			vals := make([]any, len(runs))
			for i, x := range runs {
				vals[i] = x
			}
			p.RPush(ctx, k.ReplayJobRuns(job), vals...)
		}
		p.ZAdd(ctx, k.ReplayJobs(), redis.Z{Score: float64(now), Member: job})
		return nil
	})
	return err
}

// GetBulkJob reads a job.
func (r *Redis) GetBulkJob(ctx context.Context, flow, job string) (*BulkJob, error) {
	h, err := r.Client.HGetAll(ctx, FlowKeys(flow).ReplayJob(job)).Result()
	if err != nil {
		return nil, err
	}
	if len(h) == 0 {
		return nil, &flows.Error{Code: flows.NotFound, Flow: flow, Message: fmt.Sprintf("no bulk replay job %q", job)}
	}
	atoi := func(k string) int { n, _ := strconv.Atoi(h[k]); return n }
	j := &BulkJob{ID: job, Flow: flow, Status: h["status"], Spec: json.RawMessage(h["spec"]), Total: atoi("total"), Done: atoi("done"),
		Failed: atoi("failed"), Skipped: atoi("skipped"), Created: msTime(h["created_at"]), Updated: msTime(h["updated_at"]), Error: h["error"]}
	if t := msTime(h["finished_at"]); !t.IsZero() {
		j.Finished = &t
	}
	return j, nil
}

// BulkJobs lists a flow's jobs, newest first.
func (r *Redis) BulkJobs(ctx context.Context, flow string, limit int64) ([]*BulkJob, error) {
	ids, err := r.Client.ZRevRange(ctx, FlowKeys(flow).ReplayJobs(), 0, limit-1).Result()
	if err != nil {
		return nil, err
	}
	var out []*BulkJob
	for _, id := range ids {
		j, err := r.GetBulkJob(ctx, flow, id)
		if flows.ErrorCode(err) == flows.NotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// BulkJobRuns returns the runs a job replays, in order.
func (r *Redis) BulkJobRuns(ctx context.Context, flow, job string) ([]string, error) {
	return r.Client.LRange(ctx, FlowKeys(flow).ReplayJobRuns(job), 0, -1).Result()
}

// BulkJobResults returns what replaying each run of a job gave, by run.
func (r *Redis) BulkJobResults(ctx context.Context, flow, job string) (map[string]json.RawMessage, error) {
	h, err := r.Client.HGetAll(ctx, FlowKeys(flow).ReplayJobDone(job)).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(h))
	for k, v := range h {
		out[k] = json.RawMessage(v)
	}
	return out, nil
}

// RecordBulkResult records one run's result, once; false when it had one already.
func (r *Redis) RecordBulkResult(ctx context.Context, flow, job, run string, result []byte, outcome string) (bool, error) {
	k := FlowKeys(flow)
	n, err := bulkDoneScript.Run(ctx, r.Client, []string{k.ReplayJob(job), k.ReplayJobDone(job)}, run, result, outcome, nowMS()).Int()
	return n == 1, err
}

// SetBulkStatus ends a job (done or cancelled), unless it ended already; a running one
// is only cancelled by CancelBulkJob.
func (r *Redis) SetBulkStatus(ctx context.Context, flow, job, status, errMsg string) error {
	k := FlowKeys(flow)
	now := nowMS()
	_, err := r.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k.ReplayJob(job), "status", status, "finished_at", now, "updated_at", now, "error", errMsg)
		p.Del(ctx, k.ReplayJobLease(job))
		return nil
	})
	return err
}

// CancelBulkJob marks a running job cancelled: no further run of it is replayed.
func (r *Redis) CancelBulkJob(ctx context.Context, flow, job string) error {
	j, err := r.GetBulkJob(ctx, flow, job)
	if err != nil {
		return err
	}
	if j.Status != JobRunning {
		return &flows.Error{Code: flows.Conflict, Flow: flow, Message: fmt.Sprintf("bulk replay job %q is %s already", job, j.Status)}
	}
	return r.SetBulkStatus(ctx, flow, job, JobCancelled, "")
}

// BulkJobStatus reads only a job's status ("" when it is gone).
func (r *Redis) BulkJobStatus(ctx context.Context, flow, job string) (string, error) {
	s, err := r.Client.HGet(ctx, FlowKeys(flow).ReplayJob(job), "status").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return s, err
}

// ReleaseBulkLease gives a job's lease back, if it is token's.
func (r *Redis) ReleaseBulkLease(ctx context.Context, flow, job, token string) error {
	k := FlowKeys(flow)
	return bulkLeaseScript.Run(ctx, r.Client, []string{k.ReplayJobLease(job), k.ReplayJob(job)}, token, "0").Err()
}

// TakeBulkLease takes or keeps a job's lease for ttl: 1 taken, 0 another holds it, -1 the
// job is not running.
func (r *Redis) TakeBulkLease(ctx context.Context, flow, job, token string, ttl time.Duration) (int, error) {
	k := FlowKeys(flow)
	return bulkLeaseScript.Run(ctx, r.Client, []string{k.ReplayJobLease(job), k.ReplayJob(job)}, token, ttl.Milliseconds()).Int()
}
