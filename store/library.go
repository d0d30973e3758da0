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
	"github.com/sluicehq/sluice/teams"
)

// Library is the directory of flow files: one <id>.json per flow. The saved file is the
// export and is what runs: only a valid document is written there. A working copy that
// does not validate yet (or is not published yet) is a draft, <dir>/.drafts/<id>.json:
// out of the way of `sluice worker flows/*.json` and of the library's sync, which read
// only the files in the directory itself.
//
// Workspaces (docs/teams.md): flow F of workspace W has the id "W.F" and lives in
// <dir>/W/F.json, its draft in <dir>/W/.drafts/F.json; the default workspace's flows are
// the files in the directory itself, as before workspaces.
type Library struct {
	Dir string
	// Workspaces, when set, limits ListAll (what a sync serves) to these workspaces
	// ("default" is the directory's own files): `sluice worker --workspace`.
	Workspaces []string
	// ReadOnly, when set, says why nothing may be written here (a serve of a git ref:
	// the directory is a snapshot of the ref); saves, drafts and deletes are refused
	// with it.
	ReadOnly string
}

// writable refuses a write to a read-only library, saying why.
func (l *Library) writable(id string) error {
	if l.ReadOnly != "" {
		return &flows.Error{Code: flows.Forbidden, Flow: id, Message: l.ReadOnly}
	}
	return nil
}

// DraftDir is the folder of the drafts, inside the library's directory.
const DraftDir = ".drafts"

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
	if !flows.ValidFlowID(id) {
		return "", &flows.Error{Code: flows.Invalid, Path: "id",
			Message: fmt.Sprintf("flow id %q is not valid: use lower-case letters, digits, '-' and '_' (at most %d)", id, flows.MaxIDLen)}
	}
	ws, f := l.wsDir(id)
	return filepath.Join(ws, f+".json"), nil
}

// wsDir is the directory of a flow id's workspace and its bare id.
func (l *Library) wsDir(id string) (dir, flow string) {
	if ws, f, ok := strings.Cut(id, "."); ok {
		return filepath.Join(l.Dir, ws), f
	}
	return l.Dir, id
}

// List returns every flow file of the default workspace (the directory's own), sorted
// by id. Files whose names are not valid ids are skipped.
func (l *Library) List() ([]LibraryFile, error) { return l.listDir(l.Dir, "") }

// ListIn returns the flow files of workspace ws ("default": List), ids qualified.
func (l *Library) ListIn(ws string) ([]LibraryFile, error) {
	if ws == "" || ws == "default" {
		return l.List()
	}
	if !flows.ValidID(ws) {
		return nil, nil
	}
	out, err := l.listDir(filepath.Join(l.Dir, ws), ws+".")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return out, err
}

// ListAll returns the flow files of every workspace (of l.Workspaces when set).
func (l *Library) ListAll() ([]LibraryFile, error) {
	wss := l.Workspaces
	if len(wss) == 0 {
		wss = []string{"default"}
		entries, err := os.ReadDir(l.Dir)
		if err != nil {
			return nil, fmt.Errorf("read flows directory: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() && flows.ValidID(e.Name()) {
				wss = append(wss, e.Name())
			}
		}
	}
	var out []LibraryFile
	for _, ws := range wss {
		files, err := l.ListIn(ws)
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	return out, nil
}

func (l *Library) listDir(dir, prefix string) ([]LibraryFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if prefix != "" {
			return nil, err
		}
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
		p := filepath.Join(dir, name)
		data, err := os.ReadFile(p)
		if err != nil {
			continue // removed between ReadDir and ReadFile
		}
		out = append(out, LibraryFile{ID: prefix + id, Path: p, Data: inWorkspace(prefix+id, data)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Files are the paths, relative to the library's directory, of flow id's file and
// its cases file (whether they exist or not): what a save changes.
func (l *Library) Files(id string) ([]string, error) {
	p, err := l.path(id)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(l.Dir, p)
	if err != nil {
		return nil, err
	}
	return []string{rel, strings.TrimSuffix(rel, ".json") + CasesSuffix}, nil
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
	return inWorkspace(id, data), err
}

// inWorkspace gives a document read from a workspace's folder that workspace's id: the
// folder decides whose flow a file is (a file copied in with a bare id, or another
// workspace's, becomes this one's).
func inWorkspace(id string, data []byte) []byte {
	if ws, _, ok := strings.Cut(id, "."); ok {
		return teams.QualifyDocument(ws, data)
	}
	return data
}

// Save writes the file of flow id atomically: a reader sees the old or the new file,
// never a part of one.
func (l *Library) Save(id string, data []byte) error {
	if err := l.writable(id); err != nil {
		return err
	}
	p, err := l.path(id)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if dir != l.Dir {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("workspace directory: %w", err)
		}
	}
	return writeAtomic(dir, id, p, data)
}

func writeAtomic(dir, id, p string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "."+id+".*.tmp")
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

// CasesSuffix ends the name of a flow's cases file: triage.json's test cases are in
// triage.cases.json beside it, so they are reviewed in git with the flow.
const CasesSuffix = ".cases.json"

func (l *Library) casesPath(id string) (string, error) {
	if _, err := l.path(id); err != nil {
		return "", err
	}
	dir, f := l.wsDir(id)
	return filepath.Join(dir, f+CasesSuffix), nil
}

// LoadCases returns the cases file of flow id; NotFound when it has none.
func (l *Library) LoadCases(id string) ([]byte, error) {
	p, err := l.casesPath(id)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: id, Message: "the flow has no test cases"}
	}
	return data, err
}

// SaveCases writes the cases file of flow id atomically.
func (l *Library) SaveCases(id string, data []byte) error {
	if err := l.writable(id); err != nil {
		return err
	}
	p, err := l.casesPath(id)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("workspace directory: %w", err)
	}
	return writeAtomic(dir, id, p, data)
}

// Delete removes the file of flow id, its draft and its cases.
func (l *Library) Delete(id string) error {
	if err := l.writable(id); err != nil {
		return err
	}
	p, err := l.path(id)
	if err != nil {
		return err
	}
	err = os.Remove(p)
	derr := l.DeleteDraft(id)
	if cp, cerr := l.casesPath(id); cerr == nil {
		_ = os.Remove(cp) // the cases go with their flow
	}
	if errors.Is(err, fs.ErrNotExist) {
		if derr == nil {
			return nil // there was only a draft
		}
		return &flows.Error{Code: flows.NotFound, Flow: id, Message: "no such flow"}
	}
	return err
}

// Exists reports whether flow id has a file or a draft.
func (l *Library) Exists(id string) bool {
	if _, err := l.Load(id); err == nil {
		return true
	}
	_, err := l.LoadDraft(id)
	return err == nil
}

func (l *Library) draftPath(id string) (string, error) {
	if _, err := l.path(id); err != nil {
		return "", err
	}
	dir, f := l.wsDir(id)
	return filepath.Join(dir, DraftDir, f+".json"), nil
}

// LoadDraft returns the draft of flow id.
func (l *Library) LoadDraft(id string) ([]byte, error) {
	p, err := l.draftPath(id)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &flows.Error{Code: flows.NotFound, Flow: id, Message: "no draft of this flow"}
	}
	return inWorkspace(id, data), err
}

// SaveDraft writes the draft of flow id atomically, whatever its problems.
func (l *Library) SaveDraft(id string, data []byte) error {
	if err := l.writable(id); err != nil {
		return err
	}
	p, err := l.draftPath(id)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("drafts directory: %w", err)
	}
	return writeAtomic(dir, id, p, data)
}

// DeleteDraft removes the draft of flow id; NotFound when there is none.
func (l *Library) DeleteDraft(id string) error {
	if err := l.writable(id); err != nil {
		return err
	}
	p, err := l.draftPath(id)
	if err != nil {
		return err
	}
	err = os.Remove(p)
	if errors.Is(err, fs.ErrNotExist) {
		return &flows.Error{Code: flows.NotFound, Flow: id, Message: "no draft of this flow"}
	}
	return err
}

// Drafts returns every draft of the default workspace, sorted by flow id.
func (l *Library) Drafts() ([]LibraryFile, error) { return l.DraftsIn("default") }

// DraftsIn returns every draft of workspace ws, ids qualified.
func (l *Library) DraftsIn(ws string) ([]LibraryFile, error) {
	dir, prefix := filepath.Join(l.Dir, DraftDir), ""
	if ws != "" && ws != "default" {
		if !flows.ValidID(ws) {
			return nil, nil
		}
		dir, prefix = filepath.Join(l.Dir, ws, DraftDir), ws+"."
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read drafts directory: %w", err)
	}
	var out []LibraryFile
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if e.IsDir() || !ok || !flows.ValidID(id) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		out = append(out, LibraryFile{ID: prefix + id, Path: p, Data: inWorkspace(prefix+id, data)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
