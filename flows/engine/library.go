package engine

import (
	"context"
	"crypto/sha256"
	"sync"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// LibrarySync publishes the flows of a library directory and makes workers serve them:
// a saved file's new version is live at the next Sync, without a restart. Files that do
// not compile are skipped (and reported); their previous version keeps running.
type LibrarySync struct {
	e       *Engine
	lib     *store.Library
	workers []*Worker

	mu   sync.Mutex
	seen map[string][32]byte // flow id -> hash of the file last published
}

// NewLibrarySync returns a sync of lib into workers (none: publish only).
func (e *Engine) NewLibrarySync(lib *store.Library, workers ...*Worker) *LibrarySync {
	return &LibrarySync{e: e, lib: lib, workers: workers, seen: map[string][32]byte{}}
}

// Sync publishes every changed flow file and returns the problems of those that do not
// compile, by flow id.
func (s *LibrarySync) Sync(ctx context.Context) (map[string]flows.Problems, error) {
	files, err := s.lib.List()
	if err != nil {
		return nil, err
	}
	bad := map[string]flows.Problems{}
	for _, f := range files {
		sum := sha256.Sum256(f.Data)
		s.mu.Lock()
		same := s.seen[f.ID] == sum
		s.mu.Unlock()
		if same {
			continue
		}
		if _, probs, err := s.Publish(ctx, f.ID, f.Data); err != nil {
			if probs != nil {
				bad[f.ID] = probs
				s.mu.Lock()
				s.seen[f.ID] = sum // report once per content
				s.mu.Unlock()
				continue
			}
			return bad, err
		}
		s.mu.Lock()
		s.seen[f.ID] = sum
		s.mu.Unlock()
	}
	return bad, nil
}

// Publish compiles one flow document, publishes its version and has the workers serve
// it. The document's id must be the file's id.
func (s *LibrarySync) Publish(ctx context.Context, id string, doc []byte) (*flows.Plan, flows.Problems, error) {
	return s.PublishNote(ctx, id, doc, "")
}

// PublishNote is Publish with a note for the version's history (a save's message).
func (s *LibrarySync) PublishNote(ctx context.Context, id string, doc []byte, message string) (*flows.Plan, flows.Problems, error) {
	p, probs, err := s.e.Compile(doc)
	if err != nil {
		return nil, probs, err
	}
	if p.Flow != id {
		probs = append(probs, flows.Problem{Severity: flows.SeverityError, Code: flows.CodeInvalidID, Path: "id",
			Message: "the flow's id \"" + p.Flow + "\" is not its file name \"" + id + ".json\""})
		return nil, probs, &flows.InvalidError{Flow: id, Problems: probs}
	}
	if err := s.e.PublishWithMessage(ctx, p, message); err != nil {
		return nil, probs, err
	}
	for _, w := range s.workers {
		w.Add(p.Flow)
	}
	return p, probs, nil
}
