package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/cases"
)

// fileProblems is one file's entry in `sluice validate --json`.
type fileProblems struct {
	File     string         `json:"file"`
	Problems flows.Problems `json:"problems"`
	// Error says why the file could not be read; it then has no problems.
	Error string `json:"error,omitempty"`
}

// stdinName is how problems of a document read from standard input ("-") are labelled.
const stdinName = "<stdin>"

func cmdValidate(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print a JSON array of {file, problems} instead of one line per problem")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: sluice validate [--json] FILE...

Checks flow files (and test cases files, FLOW.cases.json) and prints every problem,
one per line:

  FILE: node "ID" PATH: MESSAGE [CODE]
  FILE: warning: node "ID" PATH: MESSAGE [CODE]

Problems on an edge name the edge; problems of the whole document give only the path.
"-" reads a flow from standard input. Exit status: 0 when no file has an error
(warnings allowed), 1 when one has, 2 for a usage error or a file that cannot be read.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2, err: fmt.Errorf("validate: %v", err)}
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("validate: give at least one flow file")}
	}

	// The server's providers: a flow naming another is refused here as it would be there.
	env, err := cf.env(nil)
	if err != nil {
		return err
	}
	reg := registry(env)
	results := make([]fileProblems, 0, fs.NArg())
	unreadable, withErrors, errorCount := 0, 0, 0
	for _, name := range fs.Args() {
		res := fileProblems{File: name, Problems: flows.Problems{}}
		data, err := readFlowFile(name)
		if err != nil {
			unreadable++
			res.Error = err.Error()
			fmt.Fprintf(stderr, "sluice validate: %v\n", err)
			results = append(results, res)
			continue
		}
		if name == "-" {
			res.File = stdinName
		}
		if cases.IsCasesFile(name) {
			// A flow's test cases beside it (flows/*.json names them too): checked as
			// such, against the nodes of the flow file beside them when there is one.
			if _, ps := cases.Parse(data, siblingNodes(name)); ps != nil {
				res.Problems = ps
			}
		} else if ps := flows.Validate(data, reg, flows.DefaultLimits); ps != nil {
			res.Problems = ps
		}
		if n := len(res.Problems.Errors()); n > 0 {
			withErrors++
			errorCount += n
		}
		if !*asJSON {
			for _, p := range res.Problems {
				fmt.Fprintf(stdout, "%s: %s\n", res.File, p)
			}
		}
		results = append(results, res)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(results); err != nil {
			return err
		}
	}
	var summary []string
	if unreadable > 0 {
		summary = append(summary, fmt.Sprintf("%s could not be read", plural(unreadable, "file")))
	}
	if withErrors > 0 {
		summary = append(summary, fmt.Sprintf("%s in %d of %s", plural(errorCount, "error"), withErrors, plural(len(results), "file")))
	}
	switch {
	case unreadable > 0:
		return &exitError{code: 2, err: errors.New("validate: " + strings.Join(summary, "; "))}
	case withErrors > 0:
		return &exitError{code: 1, err: errors.New("validate: " + strings.Join(summary, "; "))}
	}
	return nil
}

// siblingNodes are the node ids of the flow file a cases file belongs to (FLOW.json
// beside FLOW.cases.json); nil when it cannot be read.
func siblingNodes(casesFile string) map[string]bool {
	data, err := os.ReadFile(strings.TrimSuffix(casesFile, cases.Suffix) + ".json")
	if err != nil {
		return nil
	}
	var d struct {
		Nodes []struct {
			ID string `json:"id"`
		} `json:"nodes"`
	}
	if json.Unmarshal(data, &d) != nil {
		return nil
	}
	out := map[string]bool{}
	for _, n := range d.Nodes {
		out[n.ID] = true
	}
	return out
}

// readFlowFile reads a flow file, or standard input for "-".
func readFlowFile(name string) ([]byte, error) {
	if name == "-" {
		data, err := io.ReadAll(os.Stdin)
		if err != nil {
			return nil, fmt.Errorf("read standard input: %v", err)
		}
		return data, nil
	}
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a flow file", name)
	}
	return os.ReadFile(name)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
