package nodes_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/flows"
	"github.com/sluicehq/sluice/flows/nodes"
	"github.com/sluicehq/sluice/flows/nodes/mcptest"
)

// validateMCPNode validates a flow whose agent has the mcp node "t" with params, and
// returns the problems.
func validateMCPNode(env *nodes.Env, params string) []flows.Problem {
	doc := `{"sluice": 1, "id": "x", "nodes": [{"id": "in", "type": "input"}, {"id": "a", "type": "agent", "params": {"model": "m", "user": "go"}},
		{"id": "t", "type": "mcp", "params": ` + params + `}],
		"edges": [{"from": "in", "to": "a"}, {"from": "t", "port": "tool", "to": "a", "to_port": "tools"}]}`
	return flows.Validate([]byte(doc), nodes.NewRegistry(env), flows.DefaultLimits).Errors()
}

// attackFiles writes, in a new folder, a marker path the attacks try to create and small
// programs each allowed line names (servers that only read stdin).
type attackFiles struct {
	dir, marker string
}

func newAttackFiles(t *testing.T) attackFiles {
	t.Helper()
	dir := t.TempDir()
	f := attackFiles{dir: dir, marker: filepath.Join(dir, "pwned")}
	for name, text := range map[string]string{
		"server.py": "import sys\nsys.stdin.read()\n",
		"server.js": "process.stdin.resume()\n",
		"server.pl": "while (<STDIN>) {}\n",
		"server.sh": "cat >/dev/null\n",
		"server.rb": "STDIN.read\n",
		// What the attacks ask the interpreters to load: each creates the marker.
		"evil.js":                   "require('fs').writeFileSync(" + jsonString(f.marker) + ", 'node')\n",
		"evil.sh":                   "touch " + f.marker + "\n",
		"lib/sitecustomize.py":      "open(" + jsonString(f.marker) + ", 'w').write('python')\n",
		"lib/Evil.pm":               "package Evil; open(my $f, '>', " + jsonString(f.marker) + "); 1;\n",
		"bin/cat":                   "#!/bin/sh\ntouch " + f.marker + "\n",
		"rubylib/evil.rb":           "File.write(" + jsonString(f.marker) + ", 'ruby')\n",
		"home/.npmrc":               "node-options=--require " + filepath.Join(dir, "evil.js") + "\n",
		"home/.config/git/config":   "",
		"home/.local/share/.keep":   "",
		"node_modules/.keep":        "",
		"lib/usercustomize.py":      "open(" + jsonString(f.marker) + ", 'w').write('python user')\n",
		"lib/python-startup.py":     "open(" + jsonString(f.marker) + ", 'w').write('startup')\n",
		"lib/nested/placeholder.md": "",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f attackFiles) path(name string) string { return filepath.Join(f.dir, name) }

// ran reports whether an attack created the marker.
func (f attackFiles) ran() bool {
	_, err := os.Stat(f.marker)
	return err == nil
}

// tryAttack refuses params both ways a flow author has: a saved flow (validation names
// node t and the JSON path) and the editor's inspector, which would start the server.
func tryAttack(t *testing.T, env *nodes.Env, f attackFiles, name, params, path string) {
	t.Helper()
	ps := validateMCPNode(env, params)
	if len(ps) == 0 {
		t.Errorf("%s: the flow validates; want a refusal at %s", name, path)
	} else if ps[0].Node != "t" || ps[0].Path != "nodes[2]."+path || ps[0].Code != flows.CodeInvalidParams {
		t.Errorf("%s: %v; want an invalid_params problem of node t at nodes[2].%s", name, ps, path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20e9)
	defer cancel()
	if _, err := env.MCPTools(ctx, "default", json.RawMessage(params)); flows.ErrorCode(err) != flows.Forbidden {
		t.Errorf("%s: the inspector answers %v; want forbidden", name, err)
	}
	if f.ran() {
		t.Fatalf("%s: the attack ran (the marker exists)", name)
	}
}

// A command line allows one program with exactly its arguments: none of a dozen ways a
// flow author could turn an allowed server into a shell gets through, and nothing runs.
func TestMCPAllowedCommandLinesGiveNoShell(t *testing.T) {
	f := newAttackFiles(t)
	lines, err := nodes.ParseMCPCommands(strings.Join([]string{
		"npx -y @modelcontextprotocol/server-github",
		"python3 " + f.path("server.py"),
		"node " + f.path("server.js"),
		"perl " + f.path("server.pl"),
		"ruby " + f.path("server.rb"),
		"sh " + f.path("server.sh"),
		os.Args[0] + " serve {dir}",
	}, ","))
	if err != nil {
		t.Fatal(err)
	}
	env := &nodes.Env{MCPCommands: lines, MCPEnv: []string{mcptest.StdioEnv}}
	t.Cleanup(env.Close)
	touch := "touch " + f.marker
	args := func(a ...string) string {
		b, _ := json.Marshal(a)
		return string(b)
	}
	for _, tc := range []struct{ name, command, args, path string }{
		{"npx's -c, as in the report", "npx", args("-y", "-c", touch), "params.args[1]"},
		{"npx's --call", "npx", args("--yes", "--call", touch), "params.args[0]"},
		{"an option after the allowed line", "npx", args("-y", "@modelcontextprotocol/server-github", "-c", touch), "params.args[2]"},
		{"another package", "npx", args("-y", "cowsay"), "params.args[1]"},
		{"two words in one argument", "npx", args("-y -c "+touch, "@modelcontextprotocol/server-github"), "params.args[0]"},
		{"python -c", "python3", args("-c", "open("+jsonString(f.marker)+", 'w')"), "params.args[0]"},
		{"python -m", "python3", args("-m", "http.server"), "params.args[0]"},
		{"node -e", "node", args("-e", "require('fs').writeFileSync("+jsonString(f.marker)+", '')"), "params.args[0]"},
		{"node --require before the script", "node", args("--require", f.path("evil.js"), f.path("server.js")), "params.args[0]"},
		{"perl -e", "perl", args("-e", "open F, '>"+f.marker+"'"), "params.args[0]"},
		{"ruby -e", "ruby", args("-e", "File.write("+jsonString(f.marker)+", '')"), "params.args[0]"},
		{"sh -c", "sh", args("-c", touch), "params.args[0]"},
		{"a shell that is not allowed", "bash", args("-c", touch), "params.command"},
		{"a shell by its path", "/bin/sh", args("-c", touch), "params.command"},
		{"env as a launcher", "env", args("sh", "-c", touch), "params.command"},
		{"busybox", "busybox", args("sh", "-c", touch), "params.command"},
		{"the allowed script's path changed", "sh", args(f.path("evil.sh")), "params.args[0]"},
		{"a placeholder given an option", os.Args[0], args("serve", "--exec="+touch), "params.args[1]"},
		{"a placeholder given a test flag", os.Args[0], args("serve", "-test.run=x"), "params.args[1]"},
		{"arguments after a placeholder", os.Args[0], args("serve", "/srv", "-c", touch), "params.args[2]"},
	} {
		params := `{"command": ` + jsonString(tc.command) + `, "args": ` + tc.args + `, "timeout": "5s"}`
		tryAttack(t, env, f, tc.name, params, tc.path)
	}
	// The lines themselves are allowed: validation passes.
	for _, params := range []string{
		`{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"]}`,
		`{"command": "sh", "args": [` + jsonString(f.path("server.sh")) + `]}`,
		`{"command": ` + jsonString(os.Args[0]) + `, "args": ["serve", "/srv/data"]}`,
	} {
		if ps := validateMCPNode(env, params); len(ps) != 0 {
			t.Errorf("an allowed line %s: %v", params, ps)
		}
	}
	// The refusal says what is allowed instead.
	ps := validateMCPNode(env, `{"command": "npx", "args": ["-y", "-c", "true"]}`)
	if len(ps) == 0 || !strings.Contains(ps[0].Message, "npx -y @modelcontextprotocol/server-github") || !strings.Contains(ps[0].Message, "--mcp-commands") {
		t.Errorf("the refusal does not say what is allowed: %v", ps)
	}
}

// The operator's lines are checked when the process starts: a launcher's line takes no
// placeholder (it would let a flow choose the program), quoting works as in a shell.
func TestMCPCommandLinesTheOperatorMayWrite(t *testing.T) {
	for _, bad := range []string{
		"npx -y {package}", "python3 -m {module}", "uvx {tool}", "sh -c {script}", "/usr/bin/node {script}",
		"docker run --rm -i {image}", "env {program}", "python3.12 {script}", "{command} stdio",
		"server {dirs...} --read-only", "server 'unclosed",
	} {
		if _, err := nodes.ParseMCPCommands(bad); err == nil {
			t.Errorf("%q is accepted", bad)
		}
	}
	lines, err := nodes.ParseMCPCommands(`github-mcp-server stdio --toolsets {toolsets}, "/opt/my server/bin/srv" --root '/srv/a b',
		mcp-server-filesystem {dirs...}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || lines[1].Command != "/opt/my server/bin/srv" || len(lines[1].Args) != 2 || lines[1].Args[1] != "/srv/a b" {
		t.Fatalf("lines %#v", lines)
	}
	env := &nodes.Env{MCPCommands: lines}
	for params, ok := range map[string]bool{
		`{"command": "github-mcp-server", "args": ["stdio", "--toolsets", "repos,issues"]}`:   true,
		`{"command": "github-mcp-server", "args": ["stdio", "--toolsets", "--read-only"]}`:    false,
		`{"command": "github-mcp-server", "args": ["stdio", "--toolsets"]}`:                   false,
		`{"command": "github-mcp-server", "args": ["stdio"]}`:                                 false,
		`{"command": "/opt/my server/bin/srv", "args": ["--root", "/srv/a b"]}`:               true,
		`{"command": "mcp-server-filesystem", "args": ["/srv/a", "/srv/b"]}`:                  true,
		`{"command": "mcp-server-filesystem", "args": []}`:                                    false,
		`{"command": "mcp-server-filesystem", "args": ["/srv/a", "--allow-write"]}`:           false,
		`{"command": "mcp-server-filesystem", "args": ["/srv/a", "/srv/b\u0000-x"]}`:          false,
		`{"command": "mcp-server-filesystem --help", "args": []}`:                             false,
		`{"command": "github-mcp-server", "args": ["stdio", "--toolsets", "repos", "--x"]}`:   false,
		`{"command": "github-mcp-server", "args": ["stdio", "--toolsets", "repos", "extra"]}`: false,
	} {
		if got := len(validateMCPNode(env, params)) == 0; got != ok {
			t.Errorf("%s: allowed %v, want %v", params, got, ok)
		}
	}
}

// A node's env is the operator's allow-list (--mcp-env), and the names that make
// Python, Node, Ruby, Perl, shells or the dynamic loader run code are refused even when
// listed. The attacks below run their code when started directly (a control shows each
// works); through Sluice none of them starts.
func TestMCPEnvIsTheOperatorsAllowListAndNeverRunsCode(t *testing.T) {
	f := newAttackFiles(t)
	lines, err := nodes.ParseMCPCommands(strings.Join([]string{
		"python3 " + f.path("server.py"), "node " + f.path("server.js"), "perl " + f.path("server.pl"),
		"ruby " + f.path("server.rb"), "bash " + f.path("server.sh"), "sh " + f.path("server.sh"),
	}, ","))
	if err != nil {
		t.Fatal(err)
	}
	env := &nodes.Env{MCPCommands: lines, MCPEnv: []string{"LOG_LEVEL", "TZ"}}
	t.Cleanup(env.Close)
	type attack struct {
		name, interpreter, script string
		env                       map[string]string
	}
	attacks := []attack{
		{"Python's warnings and webbrowser, as in the report", "python3", "server.py", map[string]string{
			"PYTHONWARNINGS": "all:0:antigravity.x:0:0", "BROWSER": "sh -c 'touch " + f.marker + "' #%s"}},
		{"PYTHONPATH with a sitecustomize", "python3", "server.py", map[string]string{"PYTHONPATH": f.path("lib")}},
		{"PYTHONSTARTUP", "python3", "server.py", map[string]string{"PYTHONSTARTUP": f.path("lib/python-startup.py"), "PYTHONINSPECT": "1"}},
		{"NODE_OPTIONS", "node", "server.js", map[string]string{"NODE_OPTIONS": "--require " + f.path("evil.js")}},
		{"npm's config through HOME", "node", "server.js", map[string]string{"HOME": f.path("home")}},
		{"npm_config_node_options", "node", "server.js", map[string]string{"npm_config_node_options": "--require " + f.path("evil.js")}},
		{"PERL5OPT with PERL5LIB", "perl", "server.pl", map[string]string{"PERL5OPT": "-MEvil", "PERL5LIB": f.path("lib")}},
		{"RUBYOPT", "ruby", "server.rb", map[string]string{"RUBYOPT": "-r" + f.path("rubylib/evil.rb")}},
		{"BASH_ENV", "bash", "server.sh", map[string]string{"BASH_ENV": f.path("evil.sh")}},
		{"a shell's ENV", "sh", "server.sh", map[string]string{"ENV": f.path("evil.sh")}},
		{"PATH", "sh", "server.sh", map[string]string{"PATH": f.path("bin") + ":/usr/bin:/bin"}},
		{"LD_PRELOAD", "sh", "server.sh", map[string]string{"LD_PRELOAD": f.path("evil.so")}},
		{"LD_LIBRARY_PATH", "sh", "server.sh", map[string]string{"LD_LIBRARY_PATH": f.path("lib")}},
		{"LD_AUDIT", "sh", "server.sh", map[string]string{"LD_AUDIT": f.path("evil.so")}},
		{"GIT_SSH_COMMAND", "sh", "server.sh", map[string]string{"GIT_SSH_COMMAND": "touch " + f.marker}},
		{"JAVA_TOOL_OPTIONS", "sh", "server.sh", map[string]string{"JAVA_TOOL_OPTIONS": "-javaagent:" + f.path("evil.jar")}},
		{"a harmless name the operator did not list", "sh", "server.sh", map[string]string{"COLOR": "1"}},
	}
	controls := 0
	for _, a := range attacks {
		names := make([]string, 0, len(a.env))
		for k := range a.env {
			names = append(names, k)
		}
		// The first name in order is the one refused (the check goes in name order).
		first := names[0]
		for _, n := range names {
			if n < first {
				first = n
			}
		}
		envJSON, _ := json.Marshal(a.env)
		params := `{"command": "` + a.interpreter + `", "args": [` + jsonString(f.path(a.script)) + `], "env": ` + string(envJSON) + `, "timeout": "5s"}`
		tryAttack(t, env, f, a.name, params, "params.env."+first)

		// The control: started directly with that environment, the attack runs (where the
		// interpreter is installed), so the marker check above could have seen it.
		if a.name == "a harmless name the operator did not list" || strings.HasPrefix(a.name, "LD_") || a.name == "GIT_SSH_COMMAND" ||
			a.name == "JAVA_TOOL_OPTIONS" || a.name == "PYTHONSTARTUP" || a.name == "a shell's ENV" || a.name == "npm's config through HOME" || a.name == "npm_config_node_options" {
			continue // these need a program that reads them (a real shared object, git, java, an interactive shell or python, npm)
		}
		if _, err := exec.LookPath(a.interpreter); err != nil {
			t.Logf("control of %q not run: %s is not installed", a.name, a.interpreter)
			continue
		}
		cmd := exec.Command(a.interpreter, f.path(a.script))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
		for k, v := range a.env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stdin = strings.NewReader("")
		_ = cmd.Run()
		if !f.ran() {
			t.Errorf("control of %q: started directly, the attack did not run; the test cannot see it", a.name)
		}
		os.Remove(f.marker)
		controls++
	}
	t.Logf("%d attacks refused, %d of them shown to run code when started directly", len(attacks), controls)

	// A listed name works; the refusal names the list.
	if ps := validateMCPNode(env, `{"command": "sh", "args": [`+jsonString(f.path("server.sh"))+`], "env": {"LOG_LEVEL": "debug", "TZ": "UTC"}}`); len(ps) != 0 {
		t.Errorf("listed names: %v", ps)
	}
	ps := validateMCPNode(env, `{"command": "sh", "args": [`+jsonString(f.path("server.sh"))+`], "env": {"COLOR": "1"}}`)
	if len(ps) == 0 || !strings.Contains(ps[0].Message, "--mcp-env") || !strings.Contains(ps[0].Message, "LOG_LEVEL, TZ") {
		t.Errorf("a name not listed: %v", ps)
	}
	// The operator cannot list them either.
	for _, name := range []string{"LD_PRELOAD", "NODE_OPTIONS", "PYTHONPATH", "PYTHONWARNINGS", "BROWSER", "BASH_ENV", "ENV",
		"PATH", "HOME", "PERL5OPT", "RUBYOPT", "npm_config_node_options", "GIT_SSH_COMMAND", "JAVA_TOOL_OPTIONS", "DYLD_INSERT_LIBRARIES", "1BAD"} {
		if err := nodes.CheckMCPEnvNames([]string{"LOG_LEVEL", name}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("--mcp-env %s: %v", name, err)
		}
	}
	if err := nodes.CheckMCPEnvNames([]string{"GITHUB_PERSONAL_ACCESS_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "NODE_ENV", "LOG_LEVEL"}); err != nil {
		t.Errorf("ordinary names: %v", err)
	}
}
