package flows

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Secrets is the operator's rule for the environment variables flows may read with
// {"$env": NAME}, and the redaction of secret values wherever a step's results go.
//
// A flow may read SLUICE_SECRET_* and the names the operator lists (--secrets), never a
// setting of Sluice itself (SLUICE_TOKEN, SLUICE_HOOK_SECRET_*, REDIS_URL, OPENAI_API_KEY,
// any other SLUICE_* and the providers' api_key_env), even when listed: whoever may save
// a flow must not be able to read the server's environment. Validation refuses other
// names with the node and JSON path; the http component refuses them again when it runs.
//
// Workspaces (docs/teams.md): the operator may give a name to some workspaces only
// ("acme:NAME" in the list; a SLUICE_SECRET_* name too), and each workspace's owner may
// narrow what its flows read to a list of their own (CheckIn's owner list): never more
// than the operator allows the workspace.
//
// Redaction replaces every known secret value by "[redacted:NAME]": the values of the
// variables flows may read, of Sluice's own secrets (the token, webhook secrets,
// provider keys) and of any variable a step actually read. It is applied where a step's
// result leaves the component (the engine's hook: output, update, items, error; live
// events), and by the http component to every response before it is cached, so that an
// upstream echoing a header puts the secret in no checkpoint, event, dead letter, page
// or log line. What a workspace's flows produce is redacted as the workspace sees it
// (In): every value still, but a value of a variable its flows may not read (another
// workspace's, a setting of Sluice) becomes "[redacted]", so that a flow that guessed
// such a value does not learn the variable's name.
type Secrets struct {
	allow    map[string]bool            // names listed besides the prefix
	scoped   map[string]map[string]bool // name -> the only workspaces it is given to
	reserved map[string]bool            // further settings of Sluice (providers' api_key_env)
	lookup   func(string) (string, bool)

	mu       sync.RWMutex
	values   map[string]string            // value -> name, every value that is redacted
	replacer *strings.Replacer            // the operator's marks: each names its variable
	inWS     map[string]*strings.Replacer // a workspace's marks (In), made when first asked for
}

// SecretPrefix starts the names of the environment variables every flow may read.
const SecretPrefix = "SLUICE_SECRET_"

// MinRedactLength is the shortest value that is redacted: a shorter one would replace
// ordinary text (a secret that short is no secret anyway).
const MinRedactLength = 6

// SecretsConfig configures NewSecrets.
type SecretsConfig struct {
	// Allow lists environment variables flows may read besides SLUICE_SECRET_*; an
	// entry "WORKSPACE:NAME" gives NAME to that workspace's flows only (with several
	// such entries, to each workspace named), whatever its prefix.
	Allow []string
	// Reserved lists further names that are settings of Sluice (the providers'
	// api_key_env), never readable by flows; their values are redacted.
	Reserved []string
	// Lookup reads one variable (default os.LookupEnv); Environ lists them all, as
	// NAME=VALUE (default os.Environ; nil with a Lookup of its own means none).
	Lookup  func(string) (string, bool)
	Environ func() []string
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// settingNames are the environment variables Sluice reads as its configuration.
// The object store's credentials (for files kept outside Redis) are among them.
var settingNames = map[string]bool{"REDIS_URL": true, "OPENAI_API_KEY": true, "OPENAI_BASE_URL": true,
	"AWS_ACCESS_KEY_ID": true, "AWS_SECRET_ACCESS_KEY": true, "AWS_SESSION_TOKEN": true, "MINIO_ROOT_USER": true, "MINIO_ROOT_PASSWORD": true}

// secretSetting reports whether a setting's value is a secret, redacted like those flows
// read. (REDIS_URL is not: no component sees it, and redacting a URL would only mangle
// outputs that mention it.)
func secretSetting(name string) bool {
	switch name {
	case "SLUICE_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "MINIO_ROOT_PASSWORD":
		return true
	}
	return strings.HasPrefix(name, "SLUICE_HOOK_SECRET_")
}

// NewSecrets builds the rule. It refuses an allow-list entry that is not a variable name
// or that names a setting of Sluice.
func NewSecrets(cfg SecretsConfig) (*Secrets, error) {
	s := &Secrets{allow: map[string]bool{}, scoped: map[string]map[string]bool{}, reserved: map[string]bool{}, lookup: cfg.Lookup, values: map[string]string{}}
	if s.lookup == nil {
		s.lookup = os.LookupEnv
		if cfg.Environ == nil {
			cfg.Environ = os.Environ
		}
	}
	for _, n := range cfg.Reserved {
		s.reserved[n] = true
	}
	for _, entry := range cfg.Allow {
		ws, n, scoped := strings.Cut(entry, ":")
		if !scoped {
			n = entry
		} else if !ValidID(ws) {
			return nil, fmt.Errorf("secrets allow-list: %q: %q is not a workspace id (WORKSPACE:NAME)", entry, ws)
		}
		if !envNameRE.MatchString(n) {
			return nil, fmt.Errorf("secrets allow-list: %q is not an environment variable name", n)
		}
		if s.setting(n) {
			return nil, fmt.Errorf("secrets allow-list: %s is a setting of Sluice itself; flows can never read it", n)
		}
		if !scoped {
			s.allow[n] = true
			continue
		}
		if s.scoped[n] == nil {
			s.scoped[n] = map[string]bool{}
		}
		s.scoped[n][ws] = true
	}
	for n := range s.scoped {
		if s.allow[n] {
			return nil, fmt.Errorf("secrets allow-list: %s is listed for every workspace and for some only: list it one way", n)
		}
	}
	if cfg.Environ != nil {
		for _, kv := range cfg.Environ() {
			name, value, _ := strings.Cut(kv, "=")
			if s.readable(name) || secretSetting(name) || s.reserved[name] {
				s.values[value] = name
			}
		}
	}
	for n := range s.scoped {
		if v, ok := s.lookup(n); ok {
			s.values[v] = n
		}
	}
	for n := range s.allow {
		if v, ok := s.lookup(n); ok {
			s.values[v] = n
		}
	}
	for n := range s.reserved {
		if v, ok := s.lookup(n); ok {
			s.values[v] = n
		}
	}
	s.build()
	return s, nil
}

// setting reports whether name is configuration of Sluice, which flows never read.
func (s *Secrets) setting(name string) bool {
	if settingNames[name] || s.reserved[name] {
		return true
	}
	return strings.HasPrefix(name, "SLUICE_") && !strings.HasPrefix(name, SecretPrefix)
}

// readable reports whether the flows of some workspace may read name.
func (s *Secrets) readable(name string) bool {
	return !s.setting(name) && (s.scoped[name] != nil || s.allow[name] || strings.HasPrefix(name, SecretPrefix) && len(name) > len(SecretPrefix))
}

// Check returns nil when the default workspace's flows may read the environment
// variable name, else an error saying why not and what to do.
func (s *Secrets) Check(name string) error { return s.CheckIn(DefaultWorkspace, name, nil) }

// CheckIn returns nil when the flows of workspace ws may read the environment variable
// name, else an error saying why not and what to do. owner is the workspace owner's
// list (nil: the owner narrowed nothing, so everything the operator gives ws).
func (s *Secrets) CheckIn(ws, name string, owner []string) error {
	if s == nil {
		s = &Secrets{} // the prefix only
	}
	switch {
	case s.setting(name):
		return fmt.Errorf("%s is a setting of Sluice itself; flows can never read it", name)
	case s.scoped[name] != nil:
		if !s.scoped[name][ws] {
			// The same answer as for a name no workspace may read: it must not tell
			// whether another workspace's flows read it.
			return notAllowed(ws, name)
		}
	case strings.HasPrefix(name, SecretPrefix) && len(name) > len(SecretPrefix), s.allow[name]:
	default:
		return notAllowed(ws, name)
	}
	if owner != nil && !slices.Contains(owner, name) {
		return fmt.Errorf("workspace %q does not let its flows read %s: its owner lists the secrets they may read (settings: secrets)", ws, name)
	}
	return nil
}

// notAllowed is the error for a variable workspace ws's flows are not given.
func notAllowed(ws, name string) error {
	if ws == DefaultWorkspace {
		return fmt.Errorf("flows may not read the environment variable %s: name it %s… or allow it on the server with --secrets %s (SLUICE_SECRETS)", name, SecretPrefix, name)
	}
	return fmt.Errorf("workspace %q's flows may not read the environment variable %s: the operator names it %s… or allows it with --secrets %s (every workspace) or --secrets %s:%s (this one)", ws, name, SecretPrefix, name, ws, name)
}

// Lookup reads a variable the default workspace's flows may read; the value is redacted
// from then on.
func (s *Secrets) Lookup(name string) (string, bool, error) {
	return s.LookupIn(DefaultWorkspace, name, nil)
}

// LookupIn reads a variable the flows of workspace ws may read (CheckIn); the value is
// redacted from then on.
func (s *Secrets) LookupIn(ws, name string, owner []string) (string, bool, error) {
	if s == nil {
		s = DefaultSecrets()
	}
	if err := s.CheckIn(ws, name, owner); err != nil {
		return "", false, err
	}
	v, ok := s.lookup(name)
	if ok && v != "" {
		s.add(name, v)
	}
	return v, ok, nil
}

func (s *Secrets) add(name, value string) {
	s.mu.RLock()
	_, known := s.values[value]
	s.mu.RUnlock()
	if known {
		return
	}
	s.mu.Lock()
	s.values[value] = name
	s.mu.Unlock()
	s.build()
}

// build makes the operator's replacer anew and forgets the workspaces' (In makes them
// again when asked).
func (s *Secrets) build() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replacer = s.newReplacer(func(string) bool { return true })
	s.inWS = nil
}

// newReplacer makes the replacer of every value long enough, in the form it has in text
// and in JSON text (escaped), the longest first so that a value containing another
// wins. A value's mark names its variable when named says so, else it is "[redacted]".
// Called with s.mu held.
func (s *Secrets) newReplacer(named func(name string) bool) *strings.Replacer {
	type pair struct{ old, new string }
	var pairs []pair
	for v, name := range s.values {
		if len(v) < MinRedactLength {
			continue
		}
		mark := "[redacted]"
		if named(name) {
			mark = "[redacted:" + name + "]"
		}
		pairs = append(pairs, pair{v, mark})
		if b, err := json.Marshal(v); err == nil {
			if esc := string(b[1 : len(b)-1]); esc != v {
				pairs = append(pairs, pair{esc, mark})
			}
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if len(pairs[i].old) != len(pairs[j].old) {
			return len(pairs[i].old) > len(pairs[j].old)
		}
		return pairs[i].old < pairs[j].old
	})
	if len(pairs) == 0 {
		return nil
	}
	args := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		args = append(args, p.old, p.new)
	}
	return strings.NewReplacer(args...)
}

// In is the redaction of what workspace ws's flows produce: every secret value is
// replaced, as Redact replaces it, but a mark names its variable only when the operator
// gives ws the variable (CheckIn without an owner's list: the names its owner may list
// are the workspace's to know); a value of another workspace's variable, or of a
// setting of Sluice, is "[redacted]". A flow that guessed such a value still learns
// that it guessed right, as redaction must tell, but not whose it is.
func (s *Secrets) In(ws string) Redaction {
	if s == nil {
		return Redaction{}
	}
	s.mu.RLock()
	r, ok := s.inWS[ws]
	s.mu.RUnlock()
	if ok {
		return Redaction{r}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.inWS[ws]; ok {
		return Redaction{r}
	}
	r = s.newReplacer(func(name string) bool { return s.CheckIn(ws, name, nil) == nil })
	if s.inWS == nil {
		s.inWS = map[string]*strings.Replacer{}
	}
	s.inWS[ws] = r
	return Redaction{r}
}

// operator is the redaction whose marks name every variable: for what only the
// operator reads (trace spans, the process's log).
func (s *Secrets) operator() Redaction {
	if s == nil {
		return Redaction{}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Redaction{s.replacer}
}

// TooShort lists the secret variables whose values are too short to be redacted.
func (s *Secrets) TooShort() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for v, name := range s.values {
		if v != "" && len(v) < MinRedactLength {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Redact replaces every secret value in text, each by a mark that names its variable:
// the operator's view, for trace spans and logs. What a workspace's flows produce is
// redacted with In.
func (s *Secrets) Redact(text string) string { return s.operator().Redact(text) }

// RedactBytes is Redact for raw bytes.
func (s *Secrets) RedactBytes(b []byte) []byte { return s.operator().RedactBytes(b) }

// RedactValue is Redact for a decoded JSON value.
func (s *Secrets) RedactValue(v any) any { return s.operator().RedactValue(v) }

// RedactError is Redact for an error.
func (s *Secrets) RedactError(err error) error { return s.operator().RedactError(err) }

// RedactResult is Redact for a step's result.
func (s *Secrets) RedactResult(r *Result) { s.operator().RedactResult(r) }

// Redaction replaces the secret values Secrets knows with the marks of one view
// (Secrets.In, a workspace's; Secrets.Redact, the operator's). The zero Redaction
// replaces nothing.
type Redaction struct{ r *strings.Replacer }

// Redact replaces every secret value in text.
func (d Redaction) Redact(text string) string {
	if d.r == nil {
		return text
	}
	return d.r.Replace(text)
}

// RedactBytes is Redact for raw bytes (a response body, JSON text); b itself is returned
// when it holds no secret.
func (d Redaction) RedactBytes(b []byte) []byte {
	if out := d.Redact(string(b)); out != string(b) {
		return []byte(out)
	}
	return b
}

// RedactValue returns v (a decoded JSON value: maps, slices, strings, numbers...) with
// every secret replaced in its strings and keys; parts without one are shared, not
// copied.
func (d Redaction) RedactValue(v any) any {
	if d.r == nil {
		return v
	}
	out, _ := redactValue(d.r, v)
	return out
}

func redactValue(r *strings.Replacer, v any) (any, bool) {
	switch x := v.(type) {
	case string:
		if y := r.Replace(x); y != x {
			return y, true
		}
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			nk := r.Replace(k)
			ne, changed := redactValue(r, e)
			if changed || nk != k {
				if out == nil {
					out = make(map[string]any, len(x))
					for k2, e2 := range x {
						out[k2] = e2
					}
				}
				if nk != k {
					delete(out, k)
				}
				out[nk] = ne
			}
		}
		if out != nil {
			return out, true
		}
	case []any:
		var out []any
		for i, e := range x {
			if ne, changed := redactValue(r, e); changed {
				if out == nil {
					out = append([]any(nil), x...)
				}
				out[i] = ne
			}
		}
		if out != nil {
			return out, true
		}
	case json.RawMessage:
		if y := r.Replace(string(x)); y != string(x) {
			return json.RawMessage(y), true
		}
	default:
		// Other Go values (structs a component returns) are redacted through their JSON.
		if v == nil {
			return v, false
		}
		switch v.(type) {
		case bool, float64, float32, int, int64, json.Number:
			return v, false
		}
		b, err := json.Marshal(v)
		if err != nil {
			return v, false
		}
		if y := r.Replace(string(b)); y != string(b) {
			if d, err := DecodeJSON([]byte(y)); err == nil {
				return d, true
			}
		}
	}
	return v, false
}

// RedactError returns err unchanged when its message holds no secret; otherwise an
// error with the message redacted that keeps the code, the place and whether it is
// permanent (the chain below is dropped: it holds the secret).
func (d Redaction) RedactError(err error) error {
	if d.r == nil || err == nil {
		return err
	}
	msg := err.Error()
	red := d.Redact(msg)
	if red == msg {
		return err
	}
	if fe, ok := err.(*Error); ok {
		c := *fe
		c.Message = d.Redact(fe.Message)
		if fe.Err != nil {
			c.Err = errors.New(d.Redact(fe.Err.Error()))
		}
		return &c
	}
	var fe *Error
	if errors.As(err, &fe) {
		return &Error{Code: fe.Code, Message: red, Permanent: fe.Permanent}
	}
	return errors.New(red)
}

// RedactResult redacts a step's result in place: its output, update and items.
func (d Redaction) RedactResult(r *Result) {
	if d.r == nil || r == nil {
		return
	}
	r.Output = d.RedactValue(r.Output)
	if r.Update != nil {
		if m, ok := d.RedactValue(r.Update).(map[string]any); ok {
			r.Update = m
		}
	}
	if r.Items != nil {
		if items, ok := d.RedactValue(r.Items).([]any); ok {
			r.Items = items // a copy when anything changed: the items may share the state's lists
		}
	}
}

var defaultSecrets = sync.OnceValue(func() *Secrets {
	s, _ := NewSecrets(SecretsConfig{})
	return s
})

// DefaultSecrets is the rule without an allow-list, over this process's environment.
func DefaultSecrets() *Secrets { return defaultSecrets() }

// processSecrets is the rule of this process, which the engine's hooks redact with.
var processSecrets atomic.Pointer[Secrets]

// UseSecrets makes s the process's rule for redaction (cmd sets it at start; nil: no
// redaction by the engine's hooks).
func UseSecrets(s *Secrets) { processSecrets.Store(s) }

// RedactStep is the engine's hook where a step's result leaves its component: it
// redacts the result and the error with the process's rule, as flow's workspace sees it
// (Secrets.In).
func RedactStep(flow string, res *Result, err error) (*Result, error) {
	s := processSecrets.Load()
	if s == nil {
		return res, err
	}
	d := s.In(WorkspaceOf(flow))
	d.RedactResult(res)
	return res, d.RedactError(err)
}

// RedactData redacts any value of flow with the process's rule: for what a step stores
// outside its result, such as the turns a long step saves (Step.SaveTurn).
func RedactData(flow string, v any) any {
	return processSecrets.Load().In(WorkspaceOf(flow)).RedactValue(v)
}

// RedactEvent is the engine's hook for flow's live events (streamed tokens): it redacts
// their JSON with the process's rule.
func RedactEvent(flow string, data []byte) []byte {
	return processSecrets.Load().In(WorkspaceOf(flow)).RedactBytes(data)
}

// RedactString redacts text with the process's rule, marks naming every variable: for
// what only the operator reads outside a step's result and events, such as trace
// spans.
func RedactString(text string) string {
	return processSecrets.Load().Redact(text)
}

// credentialRE finds what looks like an API key or token written out: OpenAI and
// Anthropic keys, bearer tokens, GitHub and Slack tokens, AWS access key ids.
var credentialRE = regexp.MustCompile(`(?i)(^|[^a-z0-9])(sk-[a-z0-9_-]{16,}|sk-ant-[a-z0-9_-]{10,}|bearer\s+[a-z0-9._~+/=-]{12,}|ghp_[a-z0-9]{20,}|xox[abp]-[a-z0-9-]{10,}|AKIA[0-9A-Z]{16})`)

// LooksLikeCredential reports whether s holds what looks like an API key or token. It is
// the one detector: validation reports such a string in a node's params as
// literal_secret, and the Langflow importer leaves such text out of the flow.
func LooksLikeCredential(s string) bool { return credentialRE.MatchString(s) }

// RedactCredentials is s with every credential LooksLikeCredential finds replaced by
// mark, for text that is kept (a name, a description) rather than dropped.
func RedactCredentials(s, mark string) string {
	var b strings.Builder
	last := 0
	for _, m := range credentialRE.FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(s[last:m[4]])
		b.WriteString(mark)
		last = m[5]
	}
	b.WriteString(s[last:])
	return b.String()
}
