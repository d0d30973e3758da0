package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

// Library is the directory of flow files: one <id>.json per flow. The saved file is the
// export; nothing else about a flow lives on disk.
type Library struct {
	Dir string
}

// LibraryFile is one flow file as found on disk.
type LibraryFile struct {
	ID   string
	Path string
	Data []byte
}

// NewLibrary returns the library in dir, creating the directory if needed.
func NewLibrary(dir string) (*Library, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("flows directory: %w", err)
	}
	return &Library{Dir: dir}, nil
}

func (l *Library) path(id string) (string, error) {
	if !flows.ValidID(id) {
		return "", &flows.Error{Code: flows.Invalid, Path: "id",
			Message: fmt.Sprintf("flow id %q is not valid: use lower-case letters, digits, '-' and '_' (at most %d)", id, flows.MaxIDLen)}
	}
	return filepath.Join(l.Dir, id+".json"), nil
}

// List returns every flow file in the directory, sorted by id. Files whose names are not
// valid ids are skipped.
func (l *Library) List() ([]LibraryFile, error) {
	entries, err := os.ReadDir(l.Dir)
	if err != nil {
		return nil, fmt.Errorf("read flows directory: %w", err)
	}
	var out []LibraryFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			continue
		}
		id := strings.TrimSuffix(name, ".json")
		if !flows.ValidID(id) {
			continue
		}
		p := filepath.Join(l.Dir, name)
		data, err := os.ReadFile(p)
		if err != nil {
			continue // removed between ReadDir and ReadFile
		}
		out = append(out, LibraryFile{ID: id, Path: p, Data: data})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Load returns the file of flow id.
func (l *Library) Load(id string) ([]byte, error) {
	p, err := l.path(id)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: id, Message: "no such flow"}
	}
	return data, err
}

// Save writes the file of flow id atomically: a reader sees the old or the new file,
// never a part of one.
func (l *Library) Save(id string, data []byte) error {
	p, err := l.path(id)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(l.Dir, "."+id+".*.tmp")
	if err != nil {
		return fmt.Errorf("save flow %q: %w", id, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("save flow %q: %w", id, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save flow %q: %w", id, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save flow %q: %w", id, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("save flow %q: %w", id, err)
	}
	return nil
}

// Delete removes the file of flow id.
func (l *Library) Delete(id string) error {
	p, err := l.path(id)
	if err != nil {
		return err
	}
	err = os.Remove(p)
	if errors.Is(err, fs.ErrNotExist) {
		return &flows.Error{Code: flows.NotFound, Flow: id, Message: "no such flow"}
	}
	return err
}
