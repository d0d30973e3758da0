package flows

import "time"

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
