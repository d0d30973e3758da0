package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/sluicehq/sluice/flows"
)

// The flows folder in git (docs/environments.md, "Git"): a save can commit the flow's
// file with its author and message, and a serve or worker can serve the flows as they
// are at a ref. This is go-git, in-process: the image has no git binary (nor a shell),
// and a commit here touches only the files it names, whatever else is staged.

// GitRepo is the git repository a flows folder is in.
type GitRepo struct {
	repo *git.Repository
	root string // the worktree's root directory
	sub  string // the flows folder inside it ("" the root), slash-separated

	mu sync.Mutex // one commit at a time (the branch moves by compare-and-set anyway)
}

// Author is who a commit is by.
type Author struct{ Name, Email string }

// OpenGitRepo opens the repository the folder dir is in (dir or a parent holds .git).
func OpenGitRepo(dir string) (*GitRepo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	repo, err := git.PlainOpenWithOptions(abs, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, &flows.Error{Code: flows.NotFound, Message: fmt.Sprintf("%s is not in a git repository (git init it, or clone one there)", dir)}
	}
	if err != nil {
		return nil, fmt.Errorf("open the git repository of %s: %w", dir, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, fmt.Errorf("the git repository of %s has no worktree: %w", dir, err)
	}
	root := wt.Filesystem.Root()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	if a, err := filepath.EvalSymlinks(abs); err == nil {
		abs = a
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("%s is outside its repository %s", dir, root)
	}
	sub := filepath.ToSlash(rel)
	if sub == "." {
		sub = ""
	}
	return &GitRepo{repo: repo, root: root, sub: sub}, nil
}

// Root is the repository's worktree directory.
func (g *GitRepo) Root() string { return g.root }

// repoPath is the path inside the repository of a file of the flows folder (rel is
// relative to the folder).
func (g *GitRepo) repoPath(rel string) string {
	return path.Join(g.sub, filepath.ToSlash(rel))
}

// DefaultAuthor is the identity of the repository's git configuration (user.name and
// user.email, the repository's or the global one), else "Sluice".
func (g *GitRepo) DefaultAuthor() Author {
	a := Author{Name: "Sluice", Email: "sluice@localhost"}
	for _, scope := range []config.Scope{config.LocalScope, config.GlobalScope} {
		c, err := g.repo.ConfigScoped(scope)
		if err != nil {
			continue
		}
		if c.User.Name != "" && c.User.Email != "" {
			return Author{Name: c.User.Name, Email: c.User.Email}
		}
	}
	return a
}

// Commit records the files at rels (relative to the flows folder) as they are on disk
// now — a missing file is removed — in one commit on the branch HEAD names, by author
// with message. Only these paths change: other changes, staged or not, stay out of it.
// The index gets the same entries, so `git status` shows nothing for them. It returns
// the new commit's hash, or "" when the files are as the branch has them already.
func (g *GitRepo) Commit(rels []string, author Author, message string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	head, err := g.repo.Reference(plumbing.HEAD, false)
	if err != nil {
		return "", fmt.Errorf("git: read HEAD: %w", err)
	}
	if head.Type() != plumbing.SymbolicReference {
		return "", &flows.Error{Code: flows.Conflict, Message: "git: HEAD is detached; check out a branch for saves to be committed to"}
	}
	branch := head.Target()
	old, err := g.repo.Reference(branch, false)
	var parent *object.Commit
	var tree *object.Tree
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		old = nil // an unborn branch: the first commit
		tree = &object.Tree{}
	case err != nil:
		return "", fmt.Errorf("git: read %s: %w", branch, err)
	default:
		if parent, err = g.repo.CommitObject(old.Hash()); err != nil {
			return "", fmt.Errorf("git: read the commit of %s: %w", branch, err)
		}
		if tree, err = parent.Tree(); err != nil {
			return "", err
		}
	}
	type change struct {
		path string
		hash plumbing.Hash // zero: removed
		info os.FileInfo
	}
	var changes []change
	for _, rel := range rels {
		p := g.repoPath(rel)
		full := filepath.Join(g.root, filepath.FromSlash(p))
		data, err := os.ReadFile(full)
		switch {
		case errors.Is(err, os.ErrNotExist):
			changes = append(changes, change{path: p})
		case err != nil:
			return "", err
		default:
			h, err := g.writeObject(plumbing.BlobObject, func(w io.Writer) error { _, err := w.Write(data); return err })
			if err != nil {
				return "", err
			}
			info, err := os.Stat(full)
			if err != nil {
				return "", err
			}
			changes = append(changes, change{path: p, hash: h, info: info})
		}
	}
	root := tree.Hash
	for _, c := range changes {
		if root, err = g.setPath(root, strings.Split(c.path, "/"), c.hash); err != nil {
			return "", err
		}
	}
	if root.IsZero() { // every file removed: the empty tree
		if root, err = g.writeObject(plumbing.TreeObject, func(io.Writer) error { return nil }); err != nil {
			return "", err
		}
	}
	if parent != nil && root == parent.TreeHash {
		return "", nil // nothing to commit
	}
	now := time.Now()
	cm := &object.Commit{
		Author:    object.Signature{Name: author.Name, Email: author.Email, When: now},
		Committer: object.Signature{Name: "Sluice", Email: "sluice@localhost", When: now},
		Message:   strings.TrimSpace(message) + "\n",
		TreeHash:  root,
	}
	if parent != nil {
		cm.ParentHashes = []plumbing.Hash{parent.Hash}
	}
	ch, err := g.writeObject(plumbing.CommitObject, func(w io.Writer) error {
		obj := &plumbing.MemoryObject{}
		if err := cm.Encode(obj); err != nil {
			return err
		}
		r, _ := obj.Reader()
		_, err := io.Copy(w, r)
		return err
	})
	if err != nil {
		return "", err
	}
	if err := g.repo.Storer.CheckAndSetReference(plumbing.NewHashReference(branch, ch), old); err != nil {
		return "", &flows.Error{Code: flows.Conflict, Message: fmt.Sprintf("git: %s moved while committing; save again", branch.Short()), Err: err}
	}
	// The index follows, so that the worktree shows no change for these files.
	idx, err := g.repo.Storer.Index()
	if err != nil {
		return ch.String(), nil // a repository without an index yet: the commit stands
	}
	for _, c := range changes {
		if c.hash.IsZero() {
			_, _ = idx.Remove(c.path)
			continue
		}
		e, err := idx.Entry(c.path)
		if err != nil {
			e = idx.Add(c.path)
		}
		e.Hash, e.Mode, e.Size, e.ModifiedAt = c.hash, filemode.Regular, uint32(c.info.Size()), c.info.ModTime()
	}
	sort.Slice(idx.Entries, func(i, j int) bool { return idx.Entries[i].Name < idx.Entries[j].Name })
	idx.Cache = nil // the cached trees of the index no longer hold
	if err := g.repo.Storer.SetIndex(idx); err != nil {
		return ch.String(), fmt.Errorf("git: committed %s but could not update the index: %w", ch, err)
	}
	return ch.String(), nil
}

// writeObject stores an object written by fill and returns its hash.
func (g *GitRepo) writeObject(t plumbing.ObjectType, fill func(io.Writer) error) (plumbing.Hash, error) {
	var buf bytes.Buffer
	if err := fill(&buf); err != nil {
		return plumbing.ZeroHash, err
	}
	obj := g.repo.Storer.NewEncodedObject()
	obj.SetType(t)
	obj.SetSize(int64(buf.Len()))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return g.repo.Storer.SetEncodedObject(obj)
}

// setPath returns the hash of the tree treeHash with the file at parts set to blob (or
// removed when blob is zero), writing the trees that change. A zero treeHash is an
// empty tree.
func (g *GitRepo) setPath(treeHash plumbing.Hash, parts []string, blob plumbing.Hash) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !treeHash.IsZero() {
		t, err := g.repo.TreeObject(treeHash)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, t.Entries...)
	}
	name := parts[0]
	at := -1
	for i, e := range entries {
		if e.Name == name {
			at = i
		}
	}
	var entry object.TreeEntry
	if len(parts) == 1 {
		entry = object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: blob}
	} else {
		var sub plumbing.Hash
		if at >= 0 && entries[at].Mode == filemode.Dir {
			sub = entries[at].Hash
		}
		h, err := g.setPath(sub, parts[1:], blob)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entry = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}
	}
	switch {
	case entry.Hash.IsZero() && at >= 0:
		entries = append(entries[:at], entries[at+1:]...)
	case entry.Hash.IsZero():
	case at >= 0:
		entries[at] = entry
	default:
		entries = append(entries, entry)
	}
	if len(entries) == 0 {
		return plumbing.ZeroHash, nil // an empty folder is no tree
	}
	// Git orders a tree's entries by name, a folder's name as if it ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	t := &object.Tree{Entries: entries}
	return g.writeObject(plumbing.TreeObject, func(w io.Writer) error {
		obj := &plumbing.MemoryObject{}
		if err := t.Encode(obj); err != nil {
			return err
		}
		r, _ := obj.Reader()
		_, err := io.Copy(w, r)
		return err
	})
}

// Resolve returns the commit a ref names (a branch, a tag, a commit or an abbreviation).
func (g *GitRepo) Resolve(ref string) (string, error) {
	h, err := g.repo.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		return "", &flows.Error{Code: flows.NotFound, Message: fmt.Sprintf("git: no ref %q in %s: %v", ref, g.root, err)}
	}
	return h.String(), nil
}

// ReadAt returns the file at rel (relative to the flows folder) as commit (Resolve's)
// has it.
func (g *GitRepo) ReadAt(commit, rel string) ([]byte, error) {
	c, err := g.repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return nil, err
	}
	f, err := c.File(g.repoPath(rel))
	if err != nil {
		return nil, &flows.Error{Code: flows.NotFound, Message: fmt.Sprintf("git: %s is not in %.12s", g.repoPath(rel), commit)}
	}
	s, err := f.Contents()
	return []byte(s), err
}

// Snapshot writes the flows folder as commit (Resolve's) has it into dir: every flow
// and cases file (*.json) in it and in its workspaces' folders, nothing from hidden
// folders (drafts); files of dir the commit does not have are removed. A reader of dir
// sees each file whole, old or new.
func (g *GitRepo) Snapshot(commit, dir string) error {
	c, err := g.repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return err
	}
	t, err := c.Tree()
	if err != nil {
		return err
	}
	if g.sub != "" {
		if t, err = t.Tree(g.sub); err != nil {
			return &flows.Error{Code: flows.NotFound, Message: fmt.Sprintf("git: the flows folder %s is not in %.12s", g.sub, commit)}
		}
	}
	want := map[string]bool{}
	err = t.Files().ForEach(func(f *object.File) error {
		parts := strings.Split(f.Name, "/")
		if len(parts) > 2 || !strings.HasSuffix(f.Name, ".json") || strings.HasPrefix(parts[0], ".") || f.Mode != filemode.Regular {
			return nil // flows are in the folder and its workspaces' folders only
		}
		data, err := f.Contents()
		if err != nil {
			return err
		}
		want[f.Name] = true
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if old, err := os.ReadFile(p); err == nil && string(old) == data {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return writeAtomic(filepath.Dir(p), strings.TrimSuffix(path.Base(f.Name), ".json"), p, []byte(data))
	})
	if err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !want[filepath.ToSlash(rel)] {
			return os.Remove(p)
		}
		return nil
	})
}
