package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Versions of the real validator and CRDs the manifests are checked with, from the Go
// module proxy (built and read on first use, cached by Go after).
const (
	kubectlValidate = "sigs.k8s.io/kubectl-validate@v0.0.4"
	kedaModule      = "github.com/kedacore/keda/v2@v2.20.2"
	kubeVersion     = "1.30"
)

// validateManifests runs kubectl-validate over a manifest file with KEDA's CRDs.
func validateManifests(t *testing.T, file string) {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", kedaModule).Output()
	if err != nil {
		t.Fatalf("go mod download %s (the KEDA CRDs): %v", kedaModule, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %s", kedaModule, out)
	}
	crds := filepath.Join(mod.Dir, "config", "crd", "bases")
	cmd := exec.Command("go", "run", kubectlValidate, "--local-crds", crds, "--version", kubeVersion, "-o", "json", file)
	cmd.Dir = t.TempDir() // outside this module: go run pkg@version builds the tool on its own
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl-validate %s: %v\n%s\n%s", filepath.Base(file), err, stdout.String(), stderr.String())
	}
}

// The deploy command of docs/deploy.md, as written there: it runs (every node it names
// is in its flows) and kubectl-validate, with KEDA 2.20.2's CRDs, finds its manifests
// valid, for each kind of Redis.
func TestTheDocumentedDeployCommandWritesValidManifests(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sh\nsluice deploy kubernetes (.*?) > sluice.yaml").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/deploy.md has no `sluice deploy kubernetes … > sluice.yaml` example")
	}
	args := []string{"deploy", "kubernetes"}
	for _, f := range strings.Fields(strings.ReplaceAll(string(m[1]), "\\\n", " ")) {
		if strings.HasPrefix(f, "flows/") { // the gallery's flows of the same name
			f = filepath.Join("..", "..", "flows", "examples", strings.TrimPrefix(f, "flows/"))
		}
		args = append(args, f)
	}
	if !bytes.Contains(doc, []byte("kubectl apply --server-side -f sluice.yaml")) {
		t.Error("docs/deploy.md does not apply the manifests server-side")
	}
	for _, redis := range []string{"", "redis://redis:6379/2", "redis+sentinel://s0:26379,s1:26379/mymaster", "rediss://redis:6380"} {
		a := args
		if redis != "" {
			for i := range a {
				if strings.HasPrefix(a[i], "redis") {
					a = append(append([]string(nil), a[:i]...), append([]string{redis}, a[i+1:]...)...)
				}
			}
		}
		out, err := exec.Command(binary, a...).Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("%q: %v\n%s", a, err, stderr)
		}
		file := filepath.Join(t.TempDir(), "sluice.yaml")
		os.WriteFile(file, out, 0o644)
		validateManifests(t, file)
	}
}

// A pool of 42 nodes on a cluster with 16 partitions (1,344 triggers) still makes objects
// the API server takes, each valid; the command says which are too large for a
// client-side apply and how to apply them.
func TestManifestsOfALargePoolAreValidAndSaySoWhenTooLargeForClientSideApply(t *testing.T) {
	nodes := []string{`{"id": "in", "type": "input"}`}
	edges := []string{}
	prev := "in"
	for i := range 40 {
		id := fmt.Sprintf("n%d", i)
		nodes = append(nodes, `{"id": "`+id+`", "type": "transform", "params": {"expr": "."}}`)
		edges = append(edges, `{"from": "`+prev+`", "to": "`+id+`"}`)
		prev = id
	}
	nodes = append(nodes, `{"id": "out", "type": "output"}`)
	edges = append(edges, `{"from": "`+prev+`", "to": "out"}`)
	dir := t.TempDir()
	flow := filepath.Join(dir, "big.json")
	os.WriteFile(flow, []byte(`{"sluice": 1, "id": "big", "nodes": [`+strings.Join(nodes, ",")+`], "edges": [`+strings.Join(edges, ",")+`]}`), 0o644)
	cmd := exec.Command(binary, "deploy", "kubernetes", flow, "--redis", "redis+cluster://r0:6379,r1:6379,r2:6379", "--partitions", "16")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "ScaledObject sluice-worker-default") || !strings.Contains(stderr.String(), "kubectl apply --server-side") {
		t.Errorf("no word of the ScaledObject being too large for a client-side apply: %q", stderr.String())
	}
	for i, obj := range strings.Split(string(out), "\n---\n") {
		if len(obj) > 1<<20 {
			t.Errorf("object %d is %d KiB, more than the API server takes", i, len(obj)>>10)
		}
	}
	file := filepath.Join(dir, "big.yaml")
	os.WriteFile(file, out, 0o644)
	validateManifests(t, file)
}
