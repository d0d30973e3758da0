package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/storetest"
)

// readFileFlow reads the text of the file its input names.
const readFileFlow = `{"sluice": 1, "id": "readfile",
  "nodes": [{"id": "in", "type": "input"}, {"id": "read", "type": "file", "params": {"file": ".file"}},
            {"id": "out", "type": "output", "params": {"value": ".documents[0] | {name, text}"}}],
  "edges": [{"from": "in", "to": "read"}, {"from": "read", "to": "out"}]}`

// A file uploaded through the API is a reference in the run's input, never its bytes;
// the run reads its text; the file can be described, downloaded and deleted, and large
// files go to the object store.
func TestUploadedFilesAreRunInputByReference(t *testing.T) {
	r := storetest.Real(t)
	s3 := storetest.StartS3(t)
	files, err := store.NewFiles(r, store.FilesOptions{MaxBytes: 3 << 20, InlineMax: 64 << 10, TTL: time.Hour, ObjectStore: s3.ObjectStore("")})
	if err != nil {
		t.Fatal(err)
	}
	a := newAPIWith(t, r, &nodes.Env{Files: files}, func(_ *server.Config, d *server.Deps) { d.Files = files })
	flow := a.saveFlow(readFileFlow, nil)
	upload := func(name, ctype string, body []byte) res {
		t.Helper()
		return a.do("POST", "/api/flows/"+flow+"/files", body, "Content-Type", ctype, "X-File-Name", url.PathEscape(name))
	}
	up := upload("notes é.md", "text/markdown", []byte("# Tides\n\nTwice a day."))
	if up.status != http.StatusCreated {
		t.Fatalf("upload: %d %s", up.status, up)
	}
	var ref map[string]any
	up.into(t, &ref)
	if ref["name"] != "notes é.md" || ref["size"] != float64(21) || ref["content_type"] != "text/markdown" || up.header.Get("Location") == "" {
		t.Errorf("reference %v", ref)
	}
	id := ref["$file"].(string)

	runID := a.start(flow, map[string]any{"input": map[string]any{"file": ref}})
	got := a.settle(flow, runID)
	if got.Status != "succeeded" || !strings.Contains(string(got.Output), "Twice a day.") {
		t.Fatalf("run %s: %s", got.Status, got.Output)
	}
	var run struct {
		Input json.RawMessage `json:"input"`
	}
	a.must(200, "GET", "/api/flows/"+flow+"/runs/"+runID, nil).into(t, &run)
	if strings.Contains(string(run.Input), "Twice a day") || !strings.Contains(string(run.Input), id) {
		t.Errorf("the run's input %s, want the reference and not the file", run.Input)
	}

	var meta map[string]any
	a.must(200, "GET", "/api/flows/"+flow+"/files/"+id, nil).into(t, &meta)
	if meta["where"] != "redis" || meta["name"] != "notes é.md" {
		t.Errorf("meta %v", meta)
	}
	content := a.must(200, "GET", "/api/flows/"+flow+"/files/"+id+"/content", nil)
	if string(content.body) != "# Tides\n\nTwice a day." || !strings.HasPrefix(content.header.Get("Content-Disposition"), "attachment") {
		t.Errorf("content %q, %v", content.body, content.header)
	}

	large := upload("big.txt", "text/plain", bytes.Repeat([]byte("tide "), 40_000)) // 200 kB
	var lref map[string]any
	large.into(t, &lref)
	a.must(200, "GET", "/api/flows/"+flow+"/files/"+lref["$file"].(string), nil).into(t, &meta)
	if meta["where"] != "s3" || len(s3.Objects(t, flow+"/")) != 1 {
		t.Errorf("a 200 kB file is kept in %v (objects %v), want the object store", meta["where"], s3.Objects(t, ""))
	}

	if res := upload("huge.bin", "application/octet-stream", make([]byte, 3<<20+1)); res.status != http.StatusRequestEntityTooLarge {
		t.Errorf("a file over the limit: %d %s", res.status, res)
	}
	if res := a.do("POST", "/api/flows/"+flow+"/files", []byte("x"), "Content-Type", "text/plain"); res.status != http.StatusUnsupportedMediaType || !strings.Contains(res.String(), "X-File-Name") {
		t.Errorf("an upload without X-File-Name: %d %s", res.status, res)
	}
	if res := a.do("POST", "/api/flows/no-such-flow/files", []byte("x"), "Content-Type", "text/plain", "X-File-Name", "a.txt"); res.status != http.StatusNotFound {
		t.Errorf("an upload for a flow that does not exist: %d %s", res.status, res)
	}
	if res := a.do("POST", "/api/flows/"+flow+"/files", []byte("x"), "Content-Type", "text/plain", "X-File-Name", "a.txt", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"); res.status != http.StatusForbidden {
		t.Errorf("an upload from another site's page: %d %s", res.status, res)
	}
	a.must(http.StatusNoContent, "DELETE", "/api/flows/"+flow+"/files/"+id, nil)
	a.must(http.StatusNotFound, "GET", "/api/flows/"+flow+"/files/"+id, nil)
	a.must(http.StatusNotFound, "GET", "/api/flows/"+flow+"/files/not-an-id/content", nil)
}
