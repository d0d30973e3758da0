// Package examples embeds the example flows: they are validated by the tests, run by the
// runtime's tests and offered by the editor as starting points.
package examples

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed *.json
var files embed.FS

// FS holds the example flow files, <id>.json.
var FS fs.FS = files

// IDs lists the examples' flow ids, sorted.
func IDs() []string {
	entries, _ := fs.ReadDir(files, ".")
	var ids []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") && !strings.HasSuffix(e.Name(), ".cases.json") {
			ids = append(ids, strings.TrimSuffix(e.Name(), ".json"))
		}
	}
	sort.Strings(ids)
	return ids
}

// Read returns the document of an example.
func Read(id string) ([]byte, error) { return fs.ReadFile(files, path.Clean(id)+".json") }

// Cases returns the test cases of an example (<id>.cases.json; every example has them).
func Cases(id string) ([]byte, error) {
	return fs.ReadFile(files, path.Clean(id)+".cases.json")
}
