package nodes_test

import (
	"strings"
	"testing"
)

func chunkTexts(t *testing.T, out any) []string {
	t.Helper()
	var texts []string
	for _, c := range out.([]any) {
		texts = append(texts, c.(map[string]any)["text"].(string))
	}
	return texts
}

// By characters, chunks break at paragraphs first, then sentences, never exceed
// chunk_size, and each starts with the end of the one before.
func TestSplitTextByCharactersWithOverlap(t *testing.T) {
	sp := buildIn(t, nil, "split_text", `{"text": ".text", "chunk_size": 60, "chunk_overlap": 30, "separators": ["\n\n", ". ", " "]}`)
	text := "Redis streams keep entries. Consumer groups share them. Workers ack.\n\nA second paragraph is here. It is short."
	res := runStep(t, sp, memoryStep(t, "f", `{"text": "`+strings.ReplaceAll(text, "\n", `\n`)+`"}`))
	got := chunkTexts(t, res.Update["chunks"])
	want := []string{"Redis streams keep entries. Consumer groups share them.", "Consumer groups share them. Workers ack.", "A second paragraph is here. It is short."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("chunks\n%q\nwant\n%q", got, want)
	}
	for _, c := range got {
		if len(c) > 60 {
			t.Errorf("chunk %q is longer than 60", c)
		}
	}
}

// Documents carry their fields into every chunk's metadata, with a source and the
// chunk's number; by tokens the size is counted in tokens.
func TestSplitTextKeepsDocumentMetadataAndCountsTokens(t *testing.T) {
	sp := buildIn(t, nil, "split_text", `{"by": "tokens", "chunk_size": 8, "chunk_overlap": 0, "separators": [" "]}`)
	res := runStep(t, sp, memoryStep(t, "f", `{"documents": [{"name": "a.md", "format": "markdown", "text": "one two three four five six seven eight nine ten eleven twelve"}, "loose text"]}`))
	chunks := res.Output.([]any)
	if len(chunks) != 3 {
		t.Fatalf("chunks %s, want two of the document and one of the loose text", asJSON(chunks))
	}
	if m := asJSON(chunks[1].(map[string]any)["metadata"]); m != `{"chunk":1,"format":"markdown","name":"a.md","source":"a.md"}` {
		t.Errorf("second chunk's metadata %s", m)
	}
	if got := chunkTexts(t, chunks); got[0] != "one two three four five six seven eight" || got[2] != "loose text" {
		t.Errorf("chunks %q, want 8 tokens each", got)
	}
}

// By Markdown headings, each section is a chunk that knows its headings; a # in a code
// block is not a heading, and a long section is split further.
func TestSplitTextByMarkdownHeadings(t *testing.T) {
	md := "Intro line.\n\n# Guide\n\nWelcome.\n\n## Install\n\nRun it:\n\n```sh\n# not a heading\nmake\n```\n\n## Use\n\n" + strings.Repeat("Use it well. ", 12) + "\n\n# FAQ\n\nAsk."
	sp := buildIn(t, nil, "split_text", `{"text": "{text: .md, name: \"guide.md\"}", "by": "markdown", "chunk_size": 100, "chunk_overlap": 0}`)
	chunks := runStep(t, sp, memoryStep(t, "f", `{"md": `+asJSON(md)+`}`)).Output.([]any)
	var heads []string
	for _, c := range chunks {
		m := c.(map[string]any)["metadata"].(map[string]any)
		h, _ := m["headers"].(string)
		heads = append(heads, h)
	}
	if got := strings.Join(heads, "|"); got != "|Guide|Guide > Install|Guide > Use|Guide > Use|FAQ" {
		t.Errorf("headings %q", got)
	}
	texts := chunkTexts(t, chunks)
	if !strings.Contains(texts[2], "# not a heading") || !strings.HasPrefix(texts[2], "## Install") {
		t.Errorf("the install section %q", texts[2])
	}
	for _, c := range texts[3:5] {
		if !strings.HasPrefix(c, "## Use\n\nUse it well.") || len(c) > 100 {
			t.Errorf("a piece of the long section %q, want it to start with its heading and stay within 100", c)
		}
	}
}

func TestSplitTextRefusesAnOverlapAsLongAsTheChunk(t *testing.T) {
	if _, err := tryBuildIn(nil, "split_text", `{"chunk_size": 10, "chunk_overlap": 10}`); err == nil || !strings.Contains(err.Error(), "chunk_overlap") {
		t.Errorf("overlap 10 of 10: %v", err)
	}
}
