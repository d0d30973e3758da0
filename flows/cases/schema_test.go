package cases_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/sluicehq/sluice/flows/cases"
)

// The schema published in docs is the one the binary checks files with.
func TestPublishedSchemaIsTheEmbeddedOne(t *testing.T) {
	docs, err := os.ReadFile("../../docs/cases.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(docs, cases.Schema()) {
		t.Error("docs/cases.schema.json differs from flows/cases/cases.schema.json: copy it")
	}
}
