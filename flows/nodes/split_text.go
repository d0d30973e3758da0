package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/flows"
)

func splitTextSpec() flows.Spec {
	return flows.Spec{
		Name:     "split_text",
		Title:    "Split text",
		Category: "data",
		Description: "Splits documents into chunks for embedding and retrieval, as LangChain's recursive splitter does: " +
			"by characters (or tokens, cl100k_base), first at the separators that keep the most together (paragraphs, " +
			"lines, sentences, words), each chunk at most chunk_size long and sharing chunk_overlap with the one before; " +
			"or by Markdown headings (by markdown), each section a chunk that knows its headings (metadata.headers, " +
			"\"Guide > Install\"), split further when longer than chunk_size. The input (text, jq) is a string, a document " +
			"({text, ...} as the file and url components make) or a list of them; every chunk is {text, metadata}, the " +
			"metadata being its document's fields but the text (name, url, title, …) with source, chunk (its number in " +
			"the document) and headers. The chunks are stored under \"as\".",
		Ports: []flows.Port{inPort, outPort},
		Params: json.RawMessage(`{
			"type": "object", "additionalProperties": false,
			"properties": {
				"text": {"type": "string", "format": "jq", "default": ".documents", "description": "jq making the text: a string, a document {text, ...}, or a list of them."},
				"by": {"enum": ["characters", "tokens", "markdown"], "default": "characters", "description": "Split by characters, by tokens, or at Markdown headings."},
				"chunk_size": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 1000, "description": "The longest chunk, in characters (tokens with by tokens)."},
				"chunk_overlap": {"type": "integer", "minimum": 0, "default": 200, "description": "How much of the end of a chunk the next one starts with (characters or tokens)."},
				"separators": {"type": "array", "items": {"type": "string"}, "default": ["\n\n", "\n", ". ", " ", ""], "description": "Where to split, tried in order; \"\" splits anywhere."},
				"heading_levels": {"type": "integer", "minimum": 1, "maximum": 6, "default": 3, "description": "by markdown: split at headings of these levels and above (3: #, ## and ###)."},
				"as": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$", "default": "chunks", "description": "State key the chunks are stored under."}
			}
		}`),
		Example: json.RawMessage(`{"text": ".documents", "by": "markdown", "chunk_size": 1200, "chunk_overlap": 100}`),
		New:     newSplitText,
	}
}

// SplitText splits documents into chunks.
type SplitText struct {
	text       *flows.JQ
	by         string
	size       int
	overlap    int
	separators []string
	levels     int
	as         string
}

func newSplitText(b *flows.Build) (flows.Component, error) {
	var p struct {
		Text          string   `json:"text"`
		By            string   `json:"by"`
		ChunkSize     int      `json:"chunk_size"`
		ChunkOverlap  int      `json:"chunk_overlap"`
		Separators    []string `json:"separators"`
		HeadingLevels int      `json:"heading_levels"`
		As            string   `json:"as"`
	}
	if err := b.Decode(&p); err != nil {
		return nil, err
	}
	if p.ChunkOverlap >= p.ChunkSize {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.chunk_overlap",
			Message: fmt.Sprintf("chunk_overlap (%d) must be less than chunk_size (%d)", p.ChunkOverlap, p.ChunkSize)}
	}
	q, err := flows.CompileJQ(p.Text)
	if err != nil {
		return nil, &flows.Error{Code: flows.Invalid, Path: "params.text", Err: err}
	}
	if len(p.Separators) == 0 {
		p.Separators = []string{""}
	}
	return &SplitText{text: q, by: p.By, size: p.ChunkSize, overlap: p.ChunkOverlap, separators: p.Separators, levels: p.HeadingLevels, as: p.As}, nil
}

// maxChunks bounds what one step makes: a chunk list that large would not fit a state.
const maxChunks = 100000

// Run splits every document of the input.
func (st *SplitText) Run(ctx context.Context, s *flows.Step) (*flows.Result, error) {
	bad := func(msg string) error {
		return flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.text", Message: msg})
	}
	v, err := st.text.First(ctx, s.Input, s.State)
	if err != nil {
		return nil, flows.Permanent(&flows.Error{Code: flows.Invalid, Node: s.Node, Path: "params.text", Err: err})
	}
	items, ok := v.([]any)
	if !ok {
		items = []any{v}
	}
	length := runeLen
	if st.by == "tokens" {
		if _, err := encoding(); err != nil {
			return nil, err
		}
		length = func(s string) int { n, _ := countTokens(s); return n }
	}
	chunks := []any{}
	for i, it := range items {
		var text string
		meta := map[string]any{}
		switch d := it.(type) {
		case string:
			text = d
		case map[string]any:
			t, ok := d["text"].(string)
			if !ok {
				return nil, bad(fmt.Sprintf("document %d has no text", i))
			}
			text = t
			for k, x := range d {
				switch k {
				case "text", "rows", "data":
				default:
					meta[k] = x
				}
			}
		case nil:
			continue
		default:
			return nil, bad(fmt.Sprintf("item %d is %s; want a string or a document {text, ...}", i, flows.TypeName(it)))
		}
		if _, ok := meta["source"]; !ok {
			for _, k := range []string{"url", "name", "title"} {
				if src, ok := meta[k].(string); ok && src != "" {
					meta["source"] = src
					break
				}
			}
		}
		var parts []piece
		if st.by == "markdown" {
			parts = st.markdown(text, length)
		} else {
			for _, c := range splitRecursive(text, st.separators, st.size, st.overlap, length) {
				parts = append(parts, piece{text: c})
			}
		}
		for n, p := range parts {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			m := make(map[string]any, len(meta)+2)
			for k, x := range meta {
				m[k] = x
			}
			m["chunk"] = n
			if p.headers != "" {
				m["headers"] = p.headers
			}
			chunks = append(chunks, map[string]any{"text": p.text, "metadata": m})
			if len(chunks) > maxChunks {
				return nil, bad(fmt.Sprintf("the documents make more than %d chunks: raise chunk_size, or split fewer documents per step (a fanout)", maxChunks))
			}
		}
	}
	return &flows.Result{Output: chunks, Update: map[string]any{st.as: chunks}}, nil
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// piece is a chunk's text and the headings it sits under.
type piece struct{ text, headers string }

// markdown cuts the text at its headings of level st.levels and above; a section
// longer than chunk_size is split further by characters.
func (st *SplitText) markdown(text string, length func(string) int) []piece {
	src := []byte(text)
	var cuts []heading
	for _, h := range markdownHeadings(src) {
		if h.level <= st.levels {
			cuts = append(cuts, h)
		}
	}
	var out []piece
	path := make([]string, 7)
	// emit keeps a section whole when it fits; a longer one is split without its heading
	// line, which then starts every piece, so each chunk says what it is about.
	emit := func(section, headers string, hasHeading bool) {
		section = strings.TrimSpace(section)
		if section == "" {
			return
		}
		if length(section) <= st.size {
			out = append(out, piece{text: section, headers: headers})
			return
		}
		head, body := "", section
		if hasHeading {
			head, body, _ = strings.Cut(section, "\n")
			head += "\n\n"
			body = strings.TrimSpace(body)
		}
		size := max(st.size-length(head), st.overlap+1)
		for _, c := range splitRecursive(body, st.separators, size, st.overlap, length) {
			out = append(out, piece{text: head + c, headers: headers})
		}
	}
	if len(cuts) == 0 {
		emit(text, "", false)
		return out
	}
	emit(text[:cuts[0].start], "", false)
	for i, h := range cuts {
		end := len(text)
		if i+1 < len(cuts) {
			end = cuts[i+1].start
		}
		path[h.level] = h.text
		for l := h.level + 1; l < len(path); l++ {
			path[l] = ""
		}
		var hs []string
		for _, p := range path[1 : h.level+1] {
			if p != "" {
				hs = append(hs, p)
			}
		}
		emit(text[h.start:end], strings.Join(hs, " > "), true)
	}
	return out
}

// splitRecursive is LangChain's recursive character splitting: split at the first
// separator the text has, split the pieces still longer than size at the next ones,
// then merge neighbouring pieces into chunks of at most size that overlap by up to
// overlap.
func splitRecursive(text string, separators []string, size, overlap int, length func(string) int) []string {
	sep, rest := separators[len(separators)-1], []string(nil)
	for i, s := range separators {
		if s == "" || strings.Contains(text, s) {
			sep, rest = s, separators[i+1:]
			break
		}
	}
	var splits []string
	if sep == "" {
		for _, r := range text {
			splits = append(splits, string(r))
		}
	} else {
		// A separator that starts with white space (a line break, a space) begins the
		// next piece, as tokenizers read " word"; punctuation (". ") ends the piece
		// before it, with its sentence.
		lead := strings.TrimLeft(sep, " \t\r\n") != sep
		parts := strings.Split(text, sep)
		for i, p := range parts {
			switch {
			case lead && i > 0:
				p = sep + p
			case !lead && i < len(parts)-1:
				p += sep
			}
			if strings.TrimSpace(p) != "" {
				splits = append(splits, p)
			}
		}
	}
	var out, good []string
	for _, s := range splits {
		if length(s) <= size {
			good = append(good, s)
			continue
		}
		out = append(out, merge(good, size, overlap, length)...)
		good = nil
		if len(rest) == 0 {
			out = append(out, strings.TrimSpace(s))
			continue
		}
		out = append(out, splitRecursive(s, rest, size, overlap, length)...)
	}
	out = append(out, merge(good, size, overlap, length)...)
	kept := out[:0]
	for _, c := range out {
		if c != "" {
			kept = append(kept, c)
		}
	}
	return kept
}

// merge joins pieces into chunks of at most size; each chunk starts with the last
// pieces of the one before, up to overlap.
func merge(pieces []string, size, overlap int, length func(string) int) []string {
	var out []string
	var cur []string
	total := 0
	for _, p := range pieces {
		n := length(p)
		if total+n > size && len(cur) > 0 {
			out = append(out, strings.TrimSpace(strings.Join(cur, "")))
			for total > overlap || (total+n > size && total > 0) {
				total -= length(cur[0])
				cur = cur[1:]
			}
		}
		cur = append(cur, p)
		total += n
	}
	if len(cur) > 0 {
		out = append(out, strings.TrimSpace(strings.Join(cur, "")))
	}
	return out
}

var _ flows.Component = (*SplitText)(nil)
