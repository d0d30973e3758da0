package nodes

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sluicehq/sluice/flows"
)

// What a flow may start as a stdio MCP server, and with what environment.
//
// Flows are written by people who must not get a shell on the worker. A stdio MCP server
// is a program the worker starts with the flow's arguments and environment, so both are
// allow-lists the operator writes:
//
//   - a command line (--mcp-commands) allows one program with exactly these arguments;
//     a placeholder word ({name}) lets one argument vary, and never matches an argument
//     that starts with "-", so a flow cannot add an option (npx -c, python -c, node -e);
//     {name...} as the last word lets one or more such arguments vary;
//   - a name (--mcp-env) allows a flow to set that environment variable of the server;
//     names that make programs load or run code (LD_PRELOAD, NODE_OPTIONS, PYTHON*,
//     BASH_ENV, BROWSER, PATH, …) are refused even there.
//
// Launchers (npx, uvx, python, node, sh, docker, …) run whatever program their arguments
// name, and where that name sits depends on each launcher's options; so a launcher's line
// takes no placeholder at all: the operator writes each allowed line out in full.

// MCPCommandLine is one command line the operator allows as a stdio MCP server.
type MCPCommandLine struct {
	Command string
	Args    []string // literal words, or placeholders ({name}, {name...})
}

func (l MCPCommandLine) String() string { return joinWords(append([]string{l.Command}, l.Args...)) }

var placeholderRE = regexp.MustCompile(`^\{([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}$`)

// ParseMCPCommands reads the operator's allowed command lines: entries separated by
// commas or newlines, each split into words like a shell would (single and double quotes,
// no expansion). It refuses a malformed entry, a placeholder in the command's place, a
// repeating placeholder before the last word, and a placeholder in a launcher's line.
func ParseMCPCommands(s string) ([]MCPCommandLine, error) {
	entries, err := splitCommandLines(s)
	if err != nil {
		return nil, err
	}
	var out []MCPCommandLine
	for _, words := range entries {
		text := joinWords(words)
		l := MCPCommandLine{Command: words[0], Args: words[1:]}
		if placeholderRE.MatchString(l.Command) {
			return nil, fmt.Errorf("%q: the command itself cannot be a placeholder", text)
		}
		for i, a := range l.Args {
			if m := placeholderRE.FindStringSubmatch(a); m != nil && m[2] != "" && i != len(l.Args)-1 {
				return nil, fmt.Errorf("%q: %s can only be the last word", text, a)
			}
		}
		if launcher(l.Command) {
			for _, a := range l.Args {
				if placeholderRE.MatchString(a) {
					return nil, fmt.Errorf("%q: %s runs whatever program its arguments name, so its line must be written out in full: "+
						"%s would let a flow choose what runs, which is a shell on the worker (list each line, e.g. npx -y @scope/server /srv/data)",
						text, filepath.Base(l.Command), a)
				}
			}
		}
		out = append(out, l)
	}
	return out, nil
}

// launcher reports whether a command runs another program named by its arguments
// (package runners, interpreters, shells, container runtimes).
func launcher(command string) bool {
	base := strings.ToLower(filepath.Base(command))
	switch base {
	case "npx", "npm", "pnpm", "pnpx", "yarn", "bunx", "bun", "deno", "node", "nodejs",
		"uvx", "uv", "pipx", "pip", "poetry", "pdm", "hatch", "conda", "mamba",
		"ruby", "gem", "bundle", "irb", "perl", "php", "lua", "luajit", "java", "dotnet", "go",
		"sh", "bash", "dash", "zsh", "ksh", "fish", "csh", "tcsh", "busybox", "env", "xargs", "nohup", "sudo", "su", "doas",
		"docker", "podman", "nerdctl", "kubectl", "ssh", "nix", "nix-shell", "flatpak", "snap":
		return true
	}
	// python, python3, python3.12, pypy3 …
	return strings.HasPrefix(base, "python") || strings.HasPrefix(base, "pypy")
}

// splitCommandLines splits s into entries (at unquoted commas and newlines) of words.
func splitCommandLines(s string) ([][]string, error) {
	var (
		entries [][]string
		words   []string
		word    strings.Builder
		inWord  bool
		quote   rune
	)
	endWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endEntry := func() {
		endWord()
		if len(words) > 0 {
			entries = append(entries, words)
			words = nil
		}
	}
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ',' || r == '\n':
			endEntry()
		case r == ' ' || r == '\t' || r == '\r':
			endWord()
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: a quote (%c) is not closed", strings.TrimSpace(s), quote)
	}
	endEntry()
	return entries, nil
}

// joinWords writes words back as a command line, quoting those that need it.
func joinWords(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n,'\"") {
			w = "'" + strings.ReplaceAll(w, "'", `'"'"'`) + "'"
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}

// matches reports whether command and args are this line, and otherwise the index of the
// first argument that differs (-1: the count or the command).
func (l MCPCommandLine) matches(command string, args []string) (bool, int) {
	if command != l.Command {
		return false, -1
	}
	for i, w := range l.Args {
		m := placeholderRE.FindStringSubmatch(w)
		if m != nil && m[2] != "" { // {name...}: one or more of the rest
			if i >= len(args) {
				return false, i
			}
			for j := i; j < len(args); j++ {
				if !placeholderValue(args[j]) {
					return false, j
				}
			}
			return true, 0
		}
		if i >= len(args) {
			return false, i
		}
		if m != nil {
			if !placeholderValue(args[i]) {
				return false, i
			}
			continue
		}
		if args[i] != w {
			return false, i
		}
	}
	if len(args) > len(l.Args) {
		return false, len(l.Args)
	}
	return true, 0
}

// placeholderValue reports whether a flow's argument may stand for a placeholder: any
// text but an option (it would change what the program does) or one with a NUL.
func placeholderValue(a string) bool {
	return a != "" && !strings.HasPrefix(a, "-") && !strings.ContainsRune(a, 0)
}

// checkMCPCommand returns nil when one of the allowed lines allows command with args, or
// an error at the first argument (or the command) that no line allows.
func checkMCPCommand(allowed []MCPCommandLine, command string, args []string) error {
	var sameCommand []string
	best := -1
	for _, l := range allowed {
		ok, at := l.matches(command, args)
		if ok {
			return nil
		}
		if l.Command == command {
			sameCommand = append(sameCommand, l.String())
			best = max(best, at)
		}
	}
	if len(sameCommand) == 0 {
		allowedText := "none"
		if len(allowed) > 0 {
			var names []string
			for _, l := range allowed {
				names = append(names, l.String())
			}
			allowedText = strings.Join(names, "; ")
		}
		return &flows.Error{Code: flows.Forbidden, Path: "params.command",
			Message: fmt.Sprintf("this server does not start %q as an MCP server; it allows: %s (--mcp-commands, see docs/mcp.md)", command, allowedText)}
	}
	path := "params.args"
	what := fmt.Sprintf("%d argument(s)", len(args))
	if best >= 0 && best < len(args) {
		path = fmt.Sprintf("params.args[%d]", best)
		what = fmt.Sprintf("argument %q", args[best])
		if strings.HasPrefix(args[best], "-") {
			what += " (an option a flow may not add)"
		}
	}
	return &flows.Error{Code: flows.Forbidden, Path: path,
		Message: fmt.Sprintf("this server does not start %q with %s; it allows only: %s (--mcp-commands, see docs/mcp.md)", command, what, strings.Join(sameCommand, "; "))}
}

// codeEnvNames are environment variables that make programs load or run code, or find
// their configuration (which can name code) somewhere else: never set by a flow.
var (
	codeEnvNames = map[string]bool{
		"PATH": true, "HOME": true, "ENV": true, "BASH_ENV": true, "IFS": true, "PS4": true, "PROMPT_COMMAND": true,
		"SHELLOPTS": true, "BASHOPTS": true, "CDPATH": true, "BROWSER": true, "EDITOR": true, "VISUAL": true, "PAGER": true,
		"CLASSPATH": true, "LOCPATH": true, "GCONV_PATH": true, "HOSTALIASES": true, "TMPDIR": true, "SHELL": true,
		"XDG_CONFIG_HOME": true, "XDG_DATA_HOME": true, "XDG_CONFIG_DIRS": true, "XDG_DATA_DIRS": true,
		"GEM_HOME": true, "GEM_PATH": true, "BUNDLE_GEMFILE": true, "RUBYOPT": true, "RUBYLIB": true,
		"LUA_PATH": true, "LUA_CPATH": true, "LUA_INIT": true, "TCLLIBPATH": true, "R_PROFILE": true, "R_PROFILE_USER": true,
		"GOFLAGS": true, "GOROOT": true, "GOPATH": true, "GOTOOLCHAIN": true, "GOPROXY": true, "GOENV": true, "GOBIN": true,
		"SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "CURL_CA_BUNDLE": true, "NODE_EXTRA_CA_CERTS": true,
	}
	codeEnvPrefixes = []string{"LD_", "DYLD_", "PYTHON", "PERL", "RUBY", "NODE_", "NPM_", "YARN_", "PNPM_", "BUN_", "DENO_",
		"UV_", "PIP_", "PIPX_", "POETRY_", "CONDA", "GIT_", "BASH_FUNC_", "JAVA_", "_JAVA_", "JDK_", "MAVEN_", "GRADLE_",
		"DOTNET_", "COREHOST_", "CGO_", "MALLOC_", "GLIBC_", "DOCKER_", "KUBECONFIG", "SSH_", "PHP", "COMPOSER_"}
)

// codeEnv reports why a flow may never set an environment variable name ("" when it may).
func codeEnv(name string) string {
	up := strings.ToUpper(name)
	if up == "NODE_ENV" { // a mode string, read by libraries; it names no code
		return ""
	}
	if codeEnvNames[up] {
		return fmt.Sprintf("%s changes which programs or code a server runs", name)
	}
	for _, p := range codeEnvPrefixes {
		if strings.HasPrefix(up, p) {
			return fmt.Sprintf("%s… variables change which code a server loads or runs", p)
		}
	}
	return ""
}

// CheckMCPEnvNames checks the operator's --mcp-env list: variable names, none that runs code.
func CheckMCPEnvNames(names []string) error {
	var errs []error
	for _, n := range names {
		switch {
		case !envName.MatchString(n):
			errs = append(errs, fmt.Errorf("%q is not an environment variable name", n))
		case codeEnv(n) != "":
			errs = append(errs, fmt.Errorf("%s cannot be allowed: %s", n, codeEnv(n)))
		}
	}
	return errors.Join(errs...)
}

// checkMCPEnv refuses a node's env variable the operator does not allow.
func checkMCPEnv(allowed []string, name string) error {
	path := "params.env." + name
	if !envName.MatchString(name) {
		return &flows.Error{Code: flows.Invalid, Path: path, Message: fmt.Sprintf("%q is not an environment variable name", name)}
	}
	if why := codeEnv(name); why != "" {
		return &flows.Error{Code: flows.Forbidden, Path: path, Message: "a flow may not set " + name + " for an MCP server: " + why}
	}
	for _, a := range allowed {
		if a == name {
			return nil
		}
	}
	list := "none"
	if len(allowed) > 0 {
		list = strings.Join(allowed, ", ")
	}
	return &flows.Error{Code: flows.Forbidden, Path: path,
		Message: fmt.Sprintf("this server does not let flows set %s for an MCP server; it allows: %s (--mcp-env, see docs/mcp.md)", name, list)}
}
