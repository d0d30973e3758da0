package engine

import (
	"context"
	"sync"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/store"
)

// LibrarySync publishes the flows of a library directory and makes workers serve them:
// a saved file's new version is live at the next Sync, without a restart. Files that do
// not compile are skipped (and reported once); their previous version keeps running.
// Compiling an unchanged file costs nothing: the engine's version cache knows it.
type LibrarySync struct {
	e       *Engine
	lib     *store.Library
	workers []*Worker

	mu        sync.Mutex
	published map[string]string // flow id -> the version this sync last made current
	reported  map[string]bool   // flow id -> its problems were reported (until it compiles)
}

// NewLibrarySync returns a sync of lib into workers (none: publish only).
func (e *Engine) NewLibrarySync(lib *store.Library, workers ...*Worker) *LibrarySync {
	return &LibrarySync{e: e, lib: lib, workers: workers, published: map[string]string{}, reported: map[string]bool{}}
}

// Sync publishes every changed flow file and returns the problems of those that do not
// compile and were not reported before, by flow id.
func (s *LibrarySync) Sync(ctx context.Context) (map[string]flows.Problems, error) {
	files, err := s.lib.ListAll()
	if err != nil {
		return nil, err
	}
	bad := map[string]flows.Problems{}
	for _, f := range files {
		p, _, cerr := s.e.Compile(f.Data)
		s.mu.Lock()
		same := cerr == nil && p.Flow == f.ID && s.published[f.ID] == p.Version
		reported := s.reported[f.ID]
		s.mu.Unlock()
		if same {
			continue
		}
		if _, probs, err := s.Publish(ctx, f.ID, f.Data); err != nil {
			if probs != nil {
				if !reported {
					bad[f.ID] = probs
				}
				s.mu.Lock()
				s.reported[f.ID] = true
				s.mu.Unlock()
				continue
			}
			return bad, err
		}
	}
	return bad, nil
}

// Publish compiles one flow document, publishes its version (makes it current) and has
// the workers serve it. The document's id must be the file's id.
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
	s.mu.Lock()
	s.published[id] = p.Version
	delete(s.reported, id)
	s.mu.Unlock()
	for _, w := range s.workers {
		w.Add(p.Flow)
	}
	return p, probs, nil
}

// Adopt records that flow's file holds version p, which the caller made current (a
// rollback is a promotion: engine.Promote moved it), and has the workers serve it: the
// next Sync does not publish the file again.
func (s *LibrarySync) Adopt(p *flows.Plan) {
	s.mu.Lock()
	s.published[p.Flow] = p.Version
	delete(s.reported, p.Flow)
	s.mu.Unlock()
	for _, w := range s.workers {
		w.Add(p.Flow)
	}
}

// Serve has the workers serve flow without publishing anything: runs of a version that
// is not current (a working copy's test cases) are worked on too.
func (s *LibrarySync) Serve(flow string) {
	for _, w := range s.workers {
		w.Add(flow)
	}
}
