// Package static embeds the editor bundle (built from ui/ into dist/) and the style sheet.
// dist/ may hold only its .gitkeep: the binary still builds, and pages that need the
// bundle say that it is missing.
package static

import (
	"embed"
	"io/fs"
)

//go:embed all:dist css
var files embed.FS

// FS is the tree served under /static/.
var FS fs.FS = files

// HasBundle reports whether the editor bundle was built into dist/.
func HasBundle() bool {
	_, err := fs.Stat(files, "dist/editor.js")
	return err == nil
}
