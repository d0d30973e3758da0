package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// leak is a component that hands back a secret it was given: in its output, its update,
// a streamed token, and (fail) its error.
type leak struct {
	secret string
	fail   bool
}

func (l leak) Run(_ context.Context, s *flows.Step) (*flows.Result, error) {
	s.Emit("token", map[string]any{"text": "the key is " + l.secret})
	if l.fail {
		return nil, flows.Permanent(fmt.Errorf("upstream answered 401: you sent Bearer %s", l.secret))
	}
	return &flows.Result{Output: map[string]any{"echo": "Bearer " + l.secret}, Update: map[string]any{"echo": l.secret}}, nil
}

// A step's result is redacted where it leaves the component (the hook in component,
// execute.go, and the live events), whichever component hands a secret back.
func TestSecretsAStepHandsBackAreRedactedBeforeTheyAreStored(t *testing.T) {
	r := storetest.Real(t)
	secret := "engine-canary-" + strings.ReplaceAll(storetest.FlowID(t), "-", "")
	rule, err := flows.NewSecrets(flows.SecretsConfig{
		Lookup:  func(k string) (string, bool) { return secret, k == "SLUICE_SECRET_ENGINE" },
		Environ: func() []string { return []string{"SLUICE_SECRET_ENGINE=" + secret} }})
	if err != nil {
		t.Fatal(err)
	}
	flows.UseSecrets(rule)
	t.Cleanup(func() { flows.UseSecrets(nil) })

	v := newEnv(t, r)
	for _, fail := range []bool{false, true} {
		v.reg.Register(flows.Spec{Name: fmt.Sprintf("leak_%v", fail), Title: "Leak", Category: "test", Description: "Hands a secret back.",
			Ports: []flows.Port{{Name: flows.PortIn, Direction: "in", Type: flows.PortState, Multiple: true}, {Name: flows.PortOut, Direction: "out", Type: flows.PortState}},
			New:   func(*flows.Build) (flows.Component, error) { return leak{secret: secret, fail: fail}, nil }})
	}
	ok := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"}, {"id": "step", "type": "leak_false"}, {"id": "out", "type": "output"}],
		"edges": [{"from": "in", "to": "step"}, {"from": "step", "to": "out"}]}`)
	bad := v.compile(`{"sluice": 1, "id": "FLOW", "nodes": [{"id": "in", "type": "input"}, {"id": "step", "type": "leak_true"}],
		"edges": [{"from": "in", "to": "step"}]}`)
	v.work(ok, bad)
	good := v.run(ok, `{}`)
	mustStatus(t, good, store.StatusSucceeded)
	failed := v.run(bad, `{}`)
	mustStatus(t, failed, store.StatusFailed)
	if !strings.Contains(failed.Error, "[redacted:SLUICE_SECRET_ENGINE]") {
		t.Errorf("run error %q: the secret is not marked as taken out", failed.Error)
	}
	if out, _ := json.Marshal(good.Output()); !strings.Contains(string(out), "[redacted:SLUICE_SECRET_ENGINE]") {
		t.Errorf("run output %s: the secret is not marked as taken out", good.Output())
	}
	// The streamed tokens reach the events stream in the background: wait for them.
	ctx := context.Background()
	for _, p := range []*flows.Plan{ok, bad} {
		events := store.FlowKeys(p.Flow).Events()
		deadline := time.Now().Add(20 * time.Second)
		for {
			n := 0
			for _, m := range r.Client.XRange(ctx, events, "-", "+").Val() {
				if m.Values["type"] == "token" {
					n++
				}
			}
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no token event of %s", p.Flow)
			}
			time.Sleep(20 * time.Millisecond)
		}
		keys, _ := r.Client.Keys(ctx, "*"+p.Flow+"*").Result()
		for _, k := range keys {
			if dump := dumpValue(ctx, r, k); strings.Contains(dump, secret) {
				t.Errorf("the secret is in %s: %.300s", k, dump)
			}
		}
	}
}

// dumpValue renders a key's whole value as text, whatever its type.
func dumpValue(ctx context.Context, r *store.Redis, k string) string {
	var b strings.Builder
	switch r.Client.Type(ctx, k).Val() {
	case "string":
		b.WriteString(r.Client.Get(ctx, k).Val())
	case "hash":
		for f, v := range r.Client.HGetAll(ctx, k).Val() {
			b.WriteString(f + "=" + v + "\n")
		}
	case "stream":
		for _, m := range r.Client.XRange(ctx, k, "-", "+").Val() {
			fmt.Fprintf(&b, "%v\n", m.Values)
		}
	case "zset":
		b.WriteString(strings.Join(r.Client.ZRange(ctx, k, 0, -1).Val(), "\n"))
	case "set":
		b.WriteString(strings.Join(r.Client.SMembers(ctx, k).Val(), "\n"))
	case "list":
		b.WriteString(strings.Join(r.Client.LRange(ctx, k, 0, -1).Val(), "\n"))
	}
	return b.String()
}
