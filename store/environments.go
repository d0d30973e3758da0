package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/teams"
)

// Environments (docs/environments.md): a workspace has an ordered list of named
// environments, each pointing at one version of each of its flows. The first one is
// where saving lands, and its pointer is the flow's `current` key, so data and
// processes from before environments keep working; the others' pointers are one hash
// per flow. Every promotion is appended to the flow's promotions stream.

// Environment is one of a workspace's environments.
type Environment struct {
	Name string `json:"name"`
	// Gate says the flow's test cases must pass on a version before it is promoted here.
	Gate bool `json:"gate,omitempty"`
	// RequireCases, with Gate, refuses a flow that has no test cases at all.
	RequireCases bool `json:"require_cases,omitempty"`
	// Role is the least role that may promote into it ("": editor).
	Role string `json:"role,omitempty"`
}

// DefaultEnvironments are a workspace's environments until an owner sets others:
// dev (where saving lands) and prod, gated by the flow's test cases.
var DefaultEnvironments = []Environment{{Name: "dev"}, {Name: "prod", Gate: true}}

// MaxEnvironments bounds how many environments a workspace has.
const MaxEnvironments = 10

// PromotionsMaxLen bounds a flow's promotion history (approximately).
const PromotionsMaxLen = 1000

// environmentsKey holds a workspace's environments (JSON), when set.
func environmentsKey(ws string) string { return "sluice:environments:" + ws }

// CheckEnvironments says what is wrong with a list of environments, by JSON path.
func CheckEnvironments(envs []Environment) error {
	if len(envs) == 0 {
		return &flows.Error{Code: flows.Invalid, Path: "environments", Message: "a workspace needs at least one environment (saving lands in the first)"}
	}
	if len(envs) > MaxEnvironments {
		return &flows.Error{Code: flows.Invalid, Path: "environments", Message: fmt.Sprintf("at most %d environments", MaxEnvironments)}
	}
	seen := map[string]bool{}
	for i, e := range envs {
		path := fmt.Sprintf("environments[%d]", i)
		if !flows.ValidID(e.Name) || len(e.Name) > 32 {
			return &flows.Error{Code: flows.Invalid, Path: path + ".name", Message: fmt.Sprintf("%q is not an environment name: use at most 32 lower-case letters, digits, '-' or '_'", e.Name)}
		}
		if seen[e.Name] {
			return &flows.Error{Code: flows.Invalid, Path: path + ".name", Message: fmt.Sprintf("environment %q is listed twice", e.Name)}
		}
		seen[e.Name] = true
		if e.Role != "" {
			r, err := teams.ParseRole(e.Role)
			if err != nil || r == teams.Viewer {
				return &flows.Error{Code: flows.Invalid, Path: path + ".role", Message: fmt.Sprintf("role %q: use operator, editor or owner", e.Role)}
			}
		}
		if e.RequireCases && !e.Gate {
			return &flows.Error{Code: flows.Invalid, Path: path + ".require_cases", Message: "require_cases needs gate: true"}
		}
	}
	return nil
}

// Environments returns workspace ws's environments, in promotion order.
func (r *Redis) Environments(ctx context.Context, ws string) ([]Environment, error) {
	b, err := r.Client.Get(ctx, environmentsKey(wsName(ws))).Bytes()
	if errors.Is(err, redis.Nil) {
		return append([]Environment(nil), DefaultEnvironments...), nil
	}
	if err != nil {
		return nil, err
	}
	var envs []Environment
	if err := json.Unmarshal(b, &envs); err != nil || len(envs) == 0 {
		return nil, fmt.Errorf("the environments of workspace %q are not readable: %v", ws, err)
	}
	return envs, nil
}

// SetEnvironments replaces workspace ws's environments (checked first).
func (r *Redis) SetEnvironments(ctx context.Context, ws string, envs []Environment) error {
	if err := CheckEnvironments(envs); err != nil {
		return err
	}
	b, _ := json.Marshal(envs)
	return r.Client.Set(ctx, environmentsKey(wsName(ws)), b, 0).Err()
}

func wsName(ws string) string {
	if ws == "" {
		return teams.DefaultWorkspace
	}
	return ws
}

// WorkspaceOf is the workspace of an engine flow id ("acme.triage": acme).
func WorkspaceOf(flow string) string {
	ws, _ := teams.Split(flow)
	return ws
}

// EnvironmentVersions returns the version each environment of envs points at for flow
// (an environment that has none is missing from the map). envs[0]'s is the flow's
// current version.
func (r *Redis) EnvironmentVersions(ctx context.Context, flow string, envs []Environment) (map[string]string, error) {
	k := FlowKeys(flow)
	pipe := r.Client.Pipeline()
	cur := pipe.Get(ctx, k.Current())
	rest := pipe.HGetAll(ctx, k.EnvVersions())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := map[string]string{}
	for i, e := range envs {
		v := rest.Val()[e.Name]
		if i == 0 {
			v = cur.Val()
		}
		if v != "" {
			out[e.Name] = v
		}
	}
	return out, nil
}

// PromotionTest is the test result a promotion was gated by.
type PromotionTest struct {
	// Gate is what the gate said: "passed", "no cases" (the flow has none), "off" (the
	// environment has no gate), "skipped" (no gate asked for: a save or a rollback in
	// the first environment).
	Gate    string   `json:"gate"`
	Cases   int      `json:"cases,omitempty"`
	Passed  int      `json:"passed,omitempty"`
	Failing []string `json:"failing,omitempty"`
}

// Promotion is one move of an environment to a version of a flow.
type Promotion struct {
	ID          string         `json:"id"`
	At          time.Time      `json:"at"`
	Environment string         `json:"environment"`
	Version     string         `json:"version"`
	Previous    string         `json:"previous,omitempty"` // the version it pointed at before
	From        string         `json:"from,omitempty"`     // the environment the version came from
	By          string         `json:"by"`
	Message     string         `json:"message,omitempty"`
	Test        *PromotionTest `json:"test,omitempty"`
}

// Promote points environment envs[idx] of flow at version and records the promotion
// (p.ID and p.At are filled in; p.Previous too, unless the caller knows it). The first environment's pointer is the flow's current
// version: promoting there adds the version to the history as saving does; use
// SetCurrent's options for the rest of what a save records.
func (r *Redis) Promote(ctx context.Context, flow string, envs []Environment, idx int, p *Promotion) error {
	k := FlowKeys(flow)
	env := envs[idx].Name
	prevCmd := r.Client.Get(ctx, k.Current())
	if idx > 0 {
		prevCmd = r.Client.HGet(ctx, k.EnvVersions(), env)
	}
	prev, err := prevCmd.Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if p.Previous != "" {
		prev = p.Previous // the caller moved it already (a rollback publishes first)
	}
	p.Previous, p.Environment = prev, env
	var test string
	if p.Test != nil {
		b, _ := json.Marshal(p.Test)
		test = string(b)
	}
	pipe := r.Client.TxPipeline()
	if idx == 0 {
		pipe.Set(ctx, k.Current(), p.Version, 0)
		pipe.ZAddNX(ctx, k.Versions(), redis.Z{Score: float64(nowMS()), Member: p.Version})
	} else {
		pipe.HSet(ctx, k.EnvVersions(), env, p.Version)
	}
	add := pipe.XAdd(ctx, &redis.XAddArgs{Stream: k.Promotions(), MaxLen: PromotionsMaxLen, Approx: true, Values: []any{
		"env", env, "version", p.Version, "previous", prev, "from", p.From, "by", p.By, "message", p.Message, "test", test}})
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	p.ID = add.Val()
	p.At = streamTime(p.ID)
	return r.Client.Incr(ctx, generationKey).Err()
}

// Promotions returns flow's promotions, newest first (at most n), of environment env
// ("" every one).
func (r *Redis) Promotions(ctx context.Context, flow, env string, n int64) ([]Promotion, error) {
	msgs, err := r.Client.XRevRangeN(ctx, FlowKeys(flow).Promotions(), "+", "-", PromotionsMaxLen).Result()
	if err != nil {
		return nil, err
	}
	out := []Promotion{}
	for _, m := range msgs {
		s := func(f string) string { v, _ := m.Values[f].(string); return v }
		if env != "" && s("env") != env {
			continue
		}
		p := Promotion{ID: m.ID, At: streamTime(m.ID), Environment: s("env"), Version: s("version"), Previous: s("previous"),
			From: s("from"), By: s("by"), Message: s("message")}
		if t := s("test"); t != "" {
			p.Test = &PromotionTest{}
			_ = json.Unmarshal([]byte(t), p.Test)
		}
		out = append(out, p)
		if int64(len(out)) >= n {
			break
		}
	}
	return out, nil
}

// streamTime is the time in a stream entry id.
func streamTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	return msTime(ms)
}

// SetScheduled puts flow in the set the schedulers look at, or takes it out.
func (r *Redis) SetScheduled(ctx context.Context, flow string, scheduled bool) error {
	if scheduled {
		return r.Client.SAdd(ctx, scheduledKey, flow).Err()
	}
	return r.Client.SRem(ctx, scheduledKey, flow).Err()
}
