// Package static embeds the editor bundle (built from ui/ into dist/), the style sheet
// and the icon, and serves them: every file also under a name that carries a hash of
// its content (dist/editor.js is dist/editor.3f9c2a1b7e.js), which the pages reference
// and which is cached for a year; compressible files are sent gzipped to clients that
// accept it. dist/ may hold only its .gitkeep: the binary still builds, and pages that
// need the bundle say that it is missing.
package static

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed all:dist css img
var files embed.FS

// FS is the tree served under /static/.
var FS fs.FS = files

// HasBundle reports whether the editor bundle was built into dist/.
func HasBundle() bool {
	_, err := fs.Stat(files, "dist/editor.js")
	return err == nil
}

// asset is one embedded file.
type asset struct {
	name   string // path in FS, e.g. dist/editor.js
	hashed string // the same with the content hash, e.g. dist/editor.3f9c2a1b7e.js
	etag   string
	ctype  string
	data   []byte

	gzOnce sync.Once
	gz     []byte // nil: not worth compressing
}

var (
	loadOnce sync.Once
	byName   map[string]*asset // by name and by hashed name
	hashedOf map[string]string
)

func load() {
	loadOnce.Do(func() {
		byName, hashedOf = map[string]*asset{}, map[string]string{}
		_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasPrefix(path.Base(p), ".") {
				return nil
			}
			data, err := fs.ReadFile(files, p)
			if err != nil {
				return nil
			}
			sum := sha256.Sum256(data)
			h := hex.EncodeToString(sum[:])[:10]
			ext := path.Ext(p)
			a := &asset{name: p, hashed: strings.TrimSuffix(p, ext) + "." + h + ext, etag: `"` + h + `"`, data: data,
				ctype: mime.TypeByExtension(ext)}
			if a.ctype == "" {
				a.ctype = http.DetectContentType(data)
			}
			byName[p], byName[a.hashed], hashedOf[p] = a, a, a.hashed
			return nil
		})
	})
}

// Path is the URL of an embedded file by its name in FS ("dist/editor.js"): its hashed
// name under /static/, or the plain one when there is no such file.
func Path(name string) string {
	load()
	if h, ok := hashedOf[name]; ok {
		return "/static/" + h
	}
	return "/static/" + name
}

// compressible reports whether a content type is text that gzip shrinks.
func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || strings.Contains(ctype, "javascript") || strings.Contains(ctype, "json") ||
		strings.Contains(ctype, "svg")
}

func (a *asset) gzipped() []byte {
	a.gzOnce.Do(func() {
		if len(a.data) < 1024 || !compressible(a.ctype) {
			return
		}
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		_, _ = w.Write(a.data)
		_ = w.Close()
		if b.Len() < len(a.data) {
			a.gz = b.Bytes()
		}
	})
	return a.gz
}

// Handler serves the embedded files, with the request path relative to /static/. A
// hashed name is cached for a year (its content never changes); a plain name must be
// revalidated (ETag) on every use.
func Handler() http.Handler {
	load()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/")
		a, ok := byName[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		h.Add("Vary", "Accept-Encoding")
		if name == a.hashed {
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
		if gz := a.gzipped(); gz != nil && acceptsGzip(r) {
			h.Set("Content-Encoding", "gzip")
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(gz))
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.data))
	})
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
