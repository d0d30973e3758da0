package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/langflow"
)

func cmdImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the Sluice flow to this file (default: standard output)")
	partial := fs.Bool("partial", false, "convert what can be converted and put marked placeholder nodes where nothing fits (the flow then fails validation until they are replaced)")
	id := fs.String("id", "", "the flow id (default: from the export's name)")
	model := fs.String("model", langflow.DefaultModel, "the model of model nodes whose export names none (Langflow 1.7 leaves it to its Model Providers setting)")
	cf := addComponentFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: sluice import langflow [flags] FILE.json

Converts a Langflow flow export into a Sluice flow. Every Langflow node without a Sluice
equivalent is reported on standard error, one line each:

  NODE-ID (TYPE): WHY

and the command exits 1 without writing anything, unless --partial. Notes (a key not
copied, a provider to configure) follow as "note:" lines. See docs/import-langflow.md.

Flags:
`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2, err: fmt.Errorf("import: %v", err)}
	}
	if len(pos) != 2 || pos[0] != "langflow" {
		fs.Usage()
		return &exitError{code: 2, err: errors.New("import: give the format and a file: sluice import langflow FILE.json")}
	}
	data, err := readFlowFile(pos[1])
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	// The conversion stops at Ctrl-C, and within a deadline anyway.
	cctx, cancel := context.WithTimeout(ctx, langflow.Timeout)
	defer cancel()
	res, err := langflow.Convert(cctx, data, langflow.Options{ID: *id, Model: *model})
	if errors.Is(err, context.DeadlineExceeded) {
		return &exitError{code: 1, err: fmt.Errorf("%s: the export did not convert within %s: it is too large or too tangled to import", pos[1], langflow.Timeout)}
	}
	if err != nil {
		return &exitError{code: 1, err: fmt.Errorf("%s: %v", pos[1], err)}
	}
	for _, g := range res.Gaps {
		fmt.Fprintln(stderr, g.String())
	}
	for _, n := range res.Notes {
		fmt.Fprintln(stderr, "note: "+n.String())
	}
	if len(res.Gaps) > 0 && !*partial {
		return &exitError{code: 1, err: fmt.Errorf("%s: %d Langflow node(s) have no Sluice equivalent (listed above); --partial converts the rest with placeholders", pos[1], len(res.Gaps))}
	}
	env, err := cf.env(nil)
	if err != nil {
		return err
	}
	probs := flows.Validate(res.Document, registry(env), flows.DefaultLimits)
	invalid := len(res.Gaps) == 0 && probs.HasErrors()
	if invalid {
		for _, p := range probs {
			fmt.Fprintf(stderr, "%s\n", p)
		}
		if !*partial {
			return &exitError{code: 1, err: fmt.Errorf("%s: the converted flow does not validate (listed above); --partial writes it to be finished", pos[1])}
		}
	}
	if *out == "" {
		_, err = stdout.Write(res.Document)
		return err
	}
	if err := os.WriteFile(*out, res.Document, 0o644); err != nil {
		return err
	}
	switch {
	case len(res.Gaps) > 0:
		fmt.Fprintf(stderr, "wrote %s with %d placeholder node(s) to replace\n", *out, len(res.Gaps))
	case invalid:
		fmt.Fprintf(stderr, "wrote %s, which does not validate until the problems above are fixed\n", *out)
	default:
		fmt.Fprintf(stderr, "wrote %s\n", *out)
	}
	return nil
}
