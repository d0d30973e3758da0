package flows

import (
	"bytes"
	"encoding/json"
	"time"
)

// The values the building blocks (memory, files, vector collections) pass between the
// components that use them and the store that keeps them in Redis. They live here so
// that flows/nodes declares the interfaces it needs and store implements them without
// either importing the other.

// HistoryMessage is one message of a conversation the memory component keeps.
type HistoryMessage struct {
	// Seq numbers the session's messages from 1, in the order they were appended.
	Seq     int64  `json:"seq,omitempty"`
	Role    string `json:"role"`
	Content string `json:"content"`
	// At is when it was appended (Unix milliseconds).
	At int64 `json:"at,omitempty"`
}

// History is a session's conversation as stored: the summary of what was summarised
// (the messages up to Through) and the messages after it, oldest first.
type History struct {
	Summary  string           `json:"summary,omitempty"`
	Through  int64            `json:"through,omitempty"`
	Messages []HistoryMessage `json:"messages"`
	// Total is how many messages the session holds after its summary (Messages may be
	// only the newest of them).
	Total int64 `json:"total"`
}

// StoreItem is one item of the long-term store: a JSON value under a key in a
// namespace (a path of labels such as ["users", "42", "preferences"]).
type StoreItem struct {
	Namespace []string  `json:"namespace"`
	Key       string    `json:"key"`
	Value     any       `json:"value"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// FileInfo describes a file kept for runs: what the state holds instead of the bytes.
type FileInfo struct {
	ID          string    `json:"id"`
	Flow        string    `json:"flow"`
	Name        string    `json:"name"`
	ContentType string    `json:"content_type"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
	// Where is "redis" or "s3".
	Where string `json:"where"`
}

// VectorDoc is one chunk of a vector collection: its text, metadata and embedding.
type VectorDoc struct {
	ID       string         `json:"id"`
	Text     string         `json:"text"`
	Metadata map[string]any `json:"metadata,omitempty"`
	Vector   []float32      `json:"-"`
}

// VectorQuery is a similarity search in a vector collection.
type VectorQuery struct {
	Vector []float32
	// Model embedded the query: a collection of another model's embeddings refuses it.
	Model string
	// K is how many chunks to return at most.
	K int
	// Filter keeps only chunks whose metadata has these values: each key's value is
	// the value it must equal, or a list of the values it may equal.
	Filter map[string]any
	// MinScore drops chunks whose cosine similarity is below it (with HasMinScore).
	MinScore    float64
	HasMinScore bool
}

// VectorHit is a chunk found by a search, with its cosine similarity to the query.
type VectorHit struct {
	ID       string         `json:"id"`
	Text     string         `json:"text"`
	Metadata map[string]any `json:"metadata,omitempty"`
	Score    float64        `json:"score"`
}

// FileRefKey is the key of a file reference in the state: {"$file": ID, "name", ...}.
const FileRefKey = "$file"

// Ref is what a run's state holds for the file: its id under "$file", and what a
// person or a model wants to know without opening it.
func (i FileInfo) Ref() map[string]any {
	return map[string]any{FileRefKey: i.ID, "name": i.Name, "content_type": i.ContentType, "size": i.Size,
		"sha256": i.SHA256, "expires": i.Expires.Format(time.RFC3339)}
}

// FileRefID is the file id of a file reference ({"$file": ID, ...}).
func FileRefID(v any) (string, bool) {
	o, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	id, ok := o[FileRefKey].(string)
	return id, ok && id != ""
}

// MatchFilter reports whether metadata has every key of filter with its value, or one
// of the values a list gives (a list matches a list only when they are equal). Numbers
// compare by value (1 and 1.0 are equal); objects by their JSON.
func MatchFilter(metadata, filter map[string]any) bool {
	for k, want := range filter {
		got, ok := metadata[k]
		if !ok {
			return false
		}
		if list, isList := want.([]any); isList {
			if _, gotList := got.([]any); !gotList {
				found := false
				for _, w := range list {
					if sameValue(got, w) {
						found = true
						break
					}
				}
				if !found {
					return false
				}
				continue
			}
		}
		if !sameValue(got, want) {
			return false
		}
	}
	return true
}

// sameValue compares two JSON values.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	ja, err1 := json.Marshal(normalize(a))
	jb, err2 := json.Marshal(normalize(b))
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}
