package main

import (
	"errors"
	"io"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/store"
)

// The deploy tests read the manifests back and hold them to the keys Sluice uses: every
// stream a ScaledObject watches is store.PartKeys(flow, p).In(node) for a node of its
// pool and a partition of its flow, every group is store.Group, and nothing is missed.
// With --scale-on length the triggers name no group (KEDA then counts XLEN).

// deployShop is a flow with its own partition count; its nodes are listed by hand in
// deployFixtures, so the test does not take them from the code it checks.
const deployShop = `{"sluice": 1, "id": "shop", "settings": {"partitions": 4},
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "coder", "type": "transform", "params": {"expr": "{code: 1}"}},
  {"id": "sql", "type": "transform", "params": {"expr": "{rows: 2}"}},
  {"id": "out", "type": "output", "params": {"value": "."}}],
 "edges": [{"from": "in", "to": "coder"}, {"from": "coder", "to": "sql"}, {"from": "sql", "to": "out"}]}`

// deployDesk takes the default partition count and shares node ids with shop.
const deployDesk = `{"sluice": 1, "id": "desk",
 "nodes": [
  {"id": "in", "type": "input"},
  {"id": "coder", "type": "transform", "params": {"expr": "{code: 3}"}},
  {"id": "answer-1", "type": "transform", "params": {"expr": "{a: 4}"}},
  {"id": "out", "type": "output", "params": {"value": "."}}],
 "edges": [{"from": "in", "to": "coder"}, {"from": "coder", "to": "answer-1"}, {"from": "answer-1", "to": "out"}]}`

type deployFixture struct {
	nodes      []string
	partitions int // 0: the default
}

var deployFixtures = map[string]deployFixture{
	"shop": {nodes: []string{"in", "coder", "sql", "out"}, partitions: 4},
	"desk": {nodes: []string{"in", "coder", "answer-1", "out"}},
}

// manifest is one YAML document, decoded loosely.
type manifest map[string]any

func (m manifest) get(path ...string) any {
	var v any = map[string]any(m)
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func (m manifest) str(path ...string) string { s, _ := m.get(path...).(string); return s }

func readManifests(t *testing.T, out string) []manifest {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(out))
	var docs []manifest
	for {
		var m map[string]any // not manifest: yaml.v3 would make every nested map one
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the output is not YAML: %v\n%s", err, out)
		}
		if m != nil {
			docs = append(docs, manifest(m))
		}
	}
	return docs
}

// pool is what the test reads of one worker Deployment and its ScaledObject.
type readPool struct {
	nodes []string // nil: --nodes not given, every node
	flows []string
}

// checkDeployManifests holds the manifests to the flows: returns the pools by name.
func checkDeployManifests(t *testing.T, docs []manifest, defaultParts int, trigger, scaleOn string) map[string]readPool {
	t.Helper()
	deployments := map[string]manifest{}
	var scaled []manifest
	for _, d := range docs {
		switch d.str("kind") {
		case "Deployment":
			deployments[d.str("metadata", "name")] = d
		case "ScaledObject":
			scaled = append(scaled, d)
		}
	}
	if deployments["sluice-serve"] == nil {
		t.Fatalf("no Deployment sluice-serve")
	}
	pools := map[string]readPool{}
	owner := map[string]string{} // flow/node -> pool
	for _, so := range scaled {
		name := so.str("metadata", "name")
		target := so.str("spec", "scaleTargetRef", "name")
		dep := deployments[target]
		if dep == nil {
			t.Fatalf("ScaledObject %s scales %q, which is no Deployment", name, target)
		}
		c := manifest(dep.get("spec", "template", "spec", "containers", "0").(map[string]any))
		var args []string
		for _, a := range c.get("args").([]any) {
			args = append(args, a.(string))
		}
		if args[0] != "worker" {
			t.Fatalf("%s runs %v, want sluice worker", target, args)
		}
		var p readPool
		for i := 1; i < len(args); i++ {
			switch {
			case args[i] == "--nodes":
				p.nodes = strings.Split(args[i+1], ",")
				i++
			case args[i] == "--metrics-addr":
				if args[i+1] != ":9090" {
					t.Errorf("%s: --metrics-addr %s", target, args[i+1])
				}
				i++
			case strings.HasPrefix(args[i], "--"):
				t.Errorf("%s: unexpected flag %s", target, args[i])
			default:
				id, ok := strings.CutSuffix(strings.TrimPrefix(args[i], "/flows/"), ".json")
				if _, known := deployFixtures[id]; !ok || !known {
					t.Fatalf("%s serves %s, not one of the flows", target, args[i])
				}
				p.flows = append(p.flows, id)
			}
		}
		if !strings.Contains(strings.Join(args, " "), "--metrics-addr :9090") {
			t.Errorf("%s has no --metrics-addr :9090: %v", target, args)
		}
		if c.str("livenessProbe", "httpGet", "path") != "/healthz" || c.str("readinessProbe", "httpGet", "path") != "/readyz" ||
			c.str("livenessProbe", "httpGet", "port") != "metrics" || c.get("ports", "0", "containerPort") != 9090 {
			t.Errorf("%s: probes or port wrong: %v", target, c)
		}
		pools[target] = p

		// What the pool should watch: every stream of its nodes, every partition.
		want := map[string]bool{}
		for id, f := range deployFixtures {
			parts := f.partitions
			if parts == 0 {
				parts = defaultParts
			}
			servesFlow := false
			for _, n := range f.nodes {
				if p.nodes != nil && !slicesContains(p.nodes, n) {
					continue
				}
				servesFlow = true
				if o := owner[id+"/"+n]; o != "" {
					t.Errorf("node %s of %s is in pools %s and %s", n, id, o, target)
				}
				owner[id+"/"+n] = target
				// One partition is partition 0, the flow's home; P > 1 are partitions 1..P.
				first, last := 0, 0
				if parts > 1 {
					first, last = 1, parts
				}
				for part := first; part <= last; part++ {
					want[store.PartKeys(id, part).In(n)] = true
				}
			}
			if servesFlow != slicesContains(p.flows, id) {
				t.Errorf("%s: serves a node of %s: %v; has the flow's file: %v", target, id, servesFlow, slicesContains(p.flows, id))
			}
		}
		for _, n := range p.nodes {
			found := false
			for _, f := range deployFixtures {
				found = found || slicesContains(f.nodes, n)
			}
			if !found {
				t.Errorf("%s: node %s is in none of the flows", target, n)
			}
		}

		lag, run, length := map[string]int{}, map[string]int{}, map[string]int{}
		var names []string
		for _, tr := range so.get("spec", "triggers").([]any) {
			tm := manifest(tr.(map[string]any))
			names = append(names, tm.str("name"))
			if tm.str("type") != trigger {
				t.Errorf("%s: trigger type %s, want %s", name, tm.str("type"), trigger)
			}
			stream, group := tm.str("metadata", "stream"), tm.str("metadata", "consumerGroup")
			if !want[stream] {
				t.Errorf("%s watches %s, which is not a stream of its nodes", name, stream)
			}
			switch {
			case tm.str("metadata", "lagCount") != "" && tm.str("metadata", "activationLagCount") != "":
				lag[stream]++
			case tm.str("metadata", "pendingEntriesCount") != "":
				run[stream]++
			case tm.str("metadata", "streamLength") != "":
				length[stream]++
			default:
				t.Errorf("%s: trigger %s scales on none of lag, pending entries, length", name, tm.str("name"))
			}
			wantGroup := store.Group
			if scaleOn == "length" {
				wantGroup = "" // KEDA counts XLEN only when no group is named
			}
			if group != wantGroup {
				t.Errorf("%s: stream %s with group %q, want %q", name, stream, group, wantGroup)
			}
		}
		for s := range want {
			if scaleOn == "length" && (length[s] != 1 || lag[s]+run[s] != 0) {
				t.Errorf("%s: stream %s has %d length, %d lag and %d pending triggers, want 1, 0, 0", name, s, length[s], lag[s], run[s])
			}
			if scaleOn == "lag" && (lag[s] != 1 || run[s] != 1 || length[s] != 0) {
				t.Errorf("%s: stream %s has %d lag, %d pending and %d length triggers, want 1, 1, 0", name, s, lag[s], run[s], length[s])
			}
		}
		terms := strings.Split(so.str("spec", "advanced", "scalingModifiers", "formula"), " + ")
		sort.Strings(terms)
		sort.Strings(names)
		if strings.Join(terms, " ") != strings.Join(names, " ") {
			t.Errorf("%s: the formula adds %v, the triggers are %v", name, terms, names)
		}
	}
	for id, f := range deployFixtures {
		for _, n := range f.nodes {
			if owner[id+"/"+n] == "" {
				t.Errorf("node %s of %s is in no pool", n, id)
			}
		}
	}
	return pools
}

func slicesContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestDeployKubernetesWatchesEveryStreamOfEveryPool(t *testing.T) {
	dir := t.TempDir()
	shop := writeFlow(t, dir, "shop.json", deployShop)
	desk := writeFlow(t, dir, "desk.json", deployDesk)

	t.Run("one pool on a single Redis", func(t *testing.T) {
		out, stderr, code := sluice(t, "", "deploy", "kubernetes", shop, desk, "--redis", "redis://redis.data:6379/2")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		docs := readManifests(t, out)
		pools := checkDeployManifests(t, docs, 1, "redis-streams", "lag")
		p, ok := pools["sluice-worker-default"]
		if len(pools) != 1 || !ok || p.nodes != nil {
			t.Fatalf("pools %v, want one, default, serving every node", pools)
		}
		for _, d := range docs {
			if d.str("kind") == "ScaledObject" {
				if a, db := d.str("spec", "triggers", "0", "metadata", "address"), d.str("spec", "triggers", "0", "metadata", "databaseIndex"); a != "redis.data:6379" || db != "2" {
					t.Errorf("KEDA reads %s db %s, want redis.data:6379 db 2", a, db)
				}
			}
		}
	})

	t.Run("pools on a cluster", func(t *testing.T) {
		out, stderr, code := sluice(t, "", "deploy", "kubernetes", shop, desk,
			"--pools", "agents=coder:sql", "--redis", "redis+cluster://r0:7000,r1:7001")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		pools := checkDeployManifests(t, readManifests(t, out), 16, "redis-cluster-streams", "lag")
		want := map[string]string{
			"sluice-worker-agents":  "coder",
			"sluice-worker-sql":     "sql",
			"sluice-worker-default": "in,out,answer-1",
		}
		for name, nodes := range want {
			if got := strings.Join(pools[name].nodes, ","); got != nodes {
				t.Errorf("%s serves %q, want %q", name, got, nodes)
			}
		}
		if len(pools) != len(want) {
			t.Errorf("pools %v, want %v", pools, want)
		}
		if got := strings.Join(pools["sluice-worker-sql"].flows, ","); got != "shop" {
			t.Errorf("the sql pool reads the flows %s, want shop only", got)
		}
	})

	// On 12 masters the default is 64 partitions (5 or 6 a master), not 16 (one on
	// eight masters, two on four), and the processes are told so.
	t.Run("a cluster of 12 masters", func(t *testing.T) {
		out, stderr, code := sluice(t, "", "deploy", "kubernetes", shop, desk, "--masters", "12", "--redis", "redis+cluster://r0:7000,r1:7001")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		docs := readManifests(t, out)
		checkDeployManifests(t, docs, 64, "redis-cluster-streams", "lag")
		for _, d := range docs {
			if d.str("kind") != "Deployment" {
				continue
			}
			env := d.get("spec", "template", "spec", "containers", "0", "env").([]any)
			if got := manifest(env[1].(map[string]any)); got.str("name") != "SLUICE_PARTITIONS" || got.str("value") != "64" {
				t.Errorf("%s: env %v, want SLUICE_PARTITIONS=64", d.str("metadata", "name"), got)
			}
		}
	})

	t.Run("partitions flag and Sentinel", func(t *testing.T) {
		out, stderr, code := sluice(t, "", "deploy", "kubernetes", shop, desk, "--partitions", "3",
			"--pools", "coder,sql", "--redis", "redis+sentinel://s0:26379,s1/mymaster/1", "--redis-password-key", "password")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		docs := readManifests(t, out)
		checkDeployManifests(t, docs, 3, "redis-sentinel-streams", "lag")
		auth := false
		for _, d := range docs {
			switch d.str("kind") {
			case "TriggerAuthentication":
				auth = d.str("spec", "secretTargetRef", "0", "key") == "password" && d.str("spec", "secretTargetRef", "0", "name") == "sluice-redis"
			case "ScaledObject":
				md := manifest(d.get("spec", "triggers", "0", "metadata").(map[string]any))
				if md.str("addresses") != "s0:26379,s1:26379" || md.str("sentinelMaster") != "mymaster" || md.str("databaseIndex") != "1" {
					t.Errorf("KEDA's Sentinel metadata: %v", md)
				}
				if d.str("spec", "triggers", "0", "authenticationRef", "name") != "sluice-redis" {
					t.Errorf("the triggers do not use the TriggerAuthentication")
				}
			case "Deployment":
				env := d.get("spec", "template", "spec", "containers", "0", "env").([]any)
				if got := manifest(env[1].(map[string]any)); got.str("name") != "SLUICE_PARTITIONS" || got.str("value") != "3" {
					t.Errorf("%s: env %v, want SLUICE_PARTITIONS=3", d.str("metadata", "name"), got)
				}
			}
		}
		if !auth {
			t.Errorf("no TriggerAuthentication taking the password from sluice-redis/password")
		}
	})
}

func TestDeployKubernetesScalesOnStreamLength(t *testing.T) {
	dir := t.TempDir()
	shop := writeFlow(t, dir, "shop.json", deployShop)
	desk := writeFlow(t, dir, "desk.json", deployDesk)
	out, stderr, code := sluice(t, "", "deploy", "kubernetes", shop, desk, "--pools", "sql", "--scale-on", "length", "--cluster", "--redis", "redis://r0:7000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkDeployManifests(t, readManifests(t, out), 16, "redis-cluster-streams", "length")
}

func TestDeployKubernetesRefusesWhatWouldNotRun(t *testing.T) {
	dir := t.TempDir()
	shop := writeFlow(t, dir, "shop.json", deployShop)
	bad := writeFlow(t, dir, "broken.json", broken)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a flow with errors, as validate prints them", []string{shop, bad}, 1, bad + `: node "shout" nodes[1].params.expr: not a valid jq`},
		{"a pool node in no flow", []string{shop, "--pools", "coder,ghost"}, 2, `pool "coder": node "ghost" is in none of the flows (shop)`},
		{"a node in two pools", []string{shop, "--pools", "coder:a=sql,coder"}, 2, `node "coder" is in two pools, "coder" and "a"`},
		{"a pool named default", []string{shop, "--pools", "default=coder"}, 2, `pool "default": the name is taken`},
		{"credentials in the Redis address", []string{shop, "--redis", "redis://:secret@redis:6379"}, 2, "credentials belong in the Secret"},
		{"Sentinel without a master name", []string{shop, "--redis", "redis+sentinel://s0:26379"}, 2, "Sentinel needs the master's name"},
		{"no flow", nil, 2, "give at least one flow file"},
		{"the same flow twice", []string{shop, shop}, 2, `flow "shop" is given twice`},
		{"an unknown scale-on", []string{shop, "--scale-on", "cpu"}, 2, `--scale-on "cpu": want lag or length`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, code := sluice(t, "", append([]string{"deploy", "kubernetes"}, c.args...)...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr, c.code, c.want)
			}
			if out != "" {
				t.Errorf("wrote manifests anyway:\n%s", out)
			}
		})
	}
	_, stderr, code := sluice(t, "", "deploy", "nomad", shop)
	if code != 2 || !strings.Contains(stderr, `unknown target "nomad"`) {
		t.Errorf("deploy nomad: exit %d, %s", code, stderr)
	}
}
