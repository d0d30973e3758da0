package static

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, path string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	return rec.Result()
}

func TestAHashedNameIsCachedForGoodAndAPlainNameIsRevalidated(t *testing.T) {
	p := Path("css/sluice.css")
	if !regexp.MustCompile(`^/static/css/sluice\.[0-9a-f]{10}\.css$`).MatchString(p) {
		t.Fatalf("Path(css/sluice.css) = %q, want a name with a content hash", p)
	}
	res := get(t, strings.TrimPrefix(p, "/static"))
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") {
		t.Errorf("hashed name: %d, Cache-Control %q; want 200, immutable", res.StatusCode, res.Header.Get("Cache-Control"))
	}
	res = get(t, "/css/sluice.css")
	if res.StatusCode != 200 || res.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("plain name: %d, Cache-Control %q; want 200, no-cache", res.StatusCode, res.Header.Get("Cache-Control"))
	}
	etag := res.Header.Get("ETag")
	if res := get(t, "/css/sluice.css", "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation with the ETag: %d, want 304", res.StatusCode)
	}
	if res := get(t, "/css/nothing.css"); res.StatusCode != 404 {
		t.Errorf("a file that is not there: %d, want 404", res.StatusCode)
	}
}

func TestTextIsSentGzippedToClientsThatAcceptIt(t *testing.T) {
	plain, _ := io.ReadAll(get(t, "/css/sluice.css").Body)
	res := get(t, "/css/sluice.css", "Accept-Encoding", "br, gzip")
	if res.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(res.Header.Get("Vary"), "Accept-Encoding") {
		t.Fatalf("Content-Encoding %q, Vary %q; want gzip, Accept-Encoding", res.Header.Get("Content-Encoding"), res.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(zr)
	if string(got) != string(plain) {
		t.Error("the gzipped body is not the file")
	}
	if res := get(t, "/css/sluice.css", "Accept-Encoding", "gzip;q=0"); res.Header.Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0 got Content-Encoding %q", res.Header.Get("Content-Encoding"))
	}
}
