package teams

import "time"

// Person is someone who signs in: with a password (Hash), or through single sign-on
// (Subject, "issuer|sub").
type Person struct {
	ID      string `json:"id"`
	Email   string `json:"email"`
	Name    string `json:"name,omitempty"`
	Hash    string `json:"hash,omitempty"`
	Subject string `json:"subject,omitempty"`
	// Groups are the groups single sign-on gave at the person's last sign-in (what an
	// approval's group asks for); none for a local account.
	Groups  []string `json:"groups,omitempty"`
	Created int64    `json:"created"`
}

// Workspace owns flows, runs and everything derived from them. Secrets is its
// allow-list of environment variable names its flows may read; Providers the LLM
// providers they may call (empty: every configured one, as before workspaces).
type Workspace struct {
	ID        string   `json:"id"`
	Name      string   `json:"name,omitempty"`
	Sensitive bool     `json:"sensitive,omitempty"`
	Secrets   []string `json:"secrets,omitempty"`
	Providers []string `json:"providers,omitempty"`
	Created   int64    `json:"created"`
}

// APIKey is a key for programs: a person's own (Person set; it can do at most what the
// person can) or a service account's (Service names it). Only the secret's digest is
// kept; the key itself is shown once, when it is made.
type APIKey struct {
	ID        string `json:"id"`
	Prefix    string `json:"prefix"` // what people see of it: "slk_<id>"
	Name      string `json:"name"`
	Workspace string `json:"workspace"`
	Role      Role   `json:"role"`
	Person    string `json:"person,omitempty"`
	Service   string `json:"service,omitempty"`
	Digest    string `json:"digest,omitempty"`
	Created   int64  `json:"created"`
	Expires   int64  `json:"expires,omitempty"` // ms; 0: never
	Revoked   int64  `json:"revoked,omitempty"`
	LastUsed  int64  `json:"last_used,omitempty"`
}

// Live reports whether the key may be used at now.
func (k APIKey) Live(now time.Time) bool {
	return k.Revoked == 0 && (k.Expires == 0 || now.UnixMilli() < k.Expires)
}

// Session is a signed-in browser.
type Session struct {
	Person  string `json:"person"`
	Created int64  `json:"created"`       // ms
	Last    int64  `json:"last"`          // ms, the last request (to a minute)
	Via     string `json:"via,omitempty"` // "password" or "sso"
}

// AuditEntry is one line of a workspace's audit log: who did what, when, from where.
type AuditEntry struct {
	ID     string `json:"id"`
	At     int64  `json:"at"` // ms
	Who    string `json:"who"`
	Action string `json:"action"`
	Target string `json:"target,omitempty"`
	From   string `json:"from,omitempty"`
	Detail string `json:"detail,omitempty"`
}
