package teams

// Routes is the permission every route of the server needs, by "METHOD path" (Echo's
// :param syntax). It is the one table: the server's middleware applies it, docs/teams.md
// shows it (a test checks the two agree), and a test walks every route × role ×
// workspace against it. A route missing here is refused to everyone but the owner of
// every workspace, and a server test fails until it is added.
var Routes = map[string]Perm{
	"GET /healthz":          Public,
	"GET /readyz":           Public,
	"POST /hooks/:flow":     Public,
	"GET /static/*":         Public,
	"GET /signin":           Public,
	"POST /signin":          Public,
	"GET /reset":            Public,
	"POST /reset":           Public,
	"GET /sso/start":        Public,
	"GET /sso/callback":     Public,
	"POST /signout":         Self,
	"GET /api/me":           Self,
	"GET /api/keys":         Self,
	"POST /api/keys":        Self,
	"DELETE /api/keys/:key": Self,

	"GET /metrics":         Instance,
	"GET /api/workspaces":  Self,
	"POST /api/workspaces": Instance,

	"GET /api/members":                Admin,
	"POST /api/members":               Admin,
	"PUT /api/members/:person":        Admin,
	"DELETE /api/members/:person":     Admin,
	"POST /api/members/:person/reset": Admin,
	"GET /api/settings":               Read,
	"PUT /api/settings":               Admin,
	"GET /api/audit":                  Admin,
	"GET /members":                    Admin,
	"GET /keys":                       Self,
	"GET /audit":                      Admin,

	"GET /ws":                               ReadRun,
	"GET /":                                 Read,
	"GET /flows/new":                        Read,
	"GET /flows/:flow":                      Read,
	"POST /flows/:flow/duplicate":           Edit,
	"POST /flows/:flow/delete":              Edit,
	"GET /runs":                             Read,
	"GET /flows/:flow/runs/:run":            ReadRun,
	"GET /queues":                           Read,
	"GET /mcp":                              Run,
	"POST /mcp":                             Run,
	"DELETE /mcp":                           Run,
	"GET /v1/models":                        Read,
	"GET /v1/models/:model":                 Read,
	"POST /v1/chat/completions":             Run,
	"POST /api/flows/:flow/files":           Run,
	"GET /api/openapi.json":                 Read,
	"GET /api/components":                   Read,
	"POST /api/mcp/tools":                   Edit,
	"GET /api/flows":                        Read,
	"POST /api/flows":                       Edit,
	"POST /api/flows/validate":              Read,
	"GET /api/flows/:flow":                  Read,
	"PUT /api/flows/:flow":                  Edit,
	"DELETE /api/flows/:flow":               Edit,
	"GET /api/flows/:flow/draft":            Read,
	"PUT /api/flows/:flow/draft":            Edit,
	"DELETE /api/flows/:flow/draft":         Edit,
	"GET /api/flows/:flow/export":           Read,
	"GET /api/flows/:flow/events":           ReadRun,
	"POST /api/flows/:flow/nodes/:node/try": Edit,

	"GET /api/flows/:flow/versions":               Read,
	"GET /api/flows/:flow/versions/:version":      Read,
	"GET /api/flows/:flow/versions/:version/diff": Read,
	"POST /api/flows/:flow/rollback":              Edit,

	// Environments and promotion (docs/environments.md): promoting needs the
	// environment's role (editor unless the workspace's owner set another).
	"GET /api/environments":                           Read,
	"PUT /api/environments":                           Admin,
	"GET /api/flows/:flow/environments":               Read,
	"POST /api/flows/:flow/environments/:env/promote": Promote,
	"GET /api/flows/:flow/promotions":                 Read,

	"GET /api/flows/:flow/schedules":                   Read,
	"POST /api/flows/:flow/schedules/:schedule/pause":  Run,
	"POST /api/flows/:flow/schedules/:schedule/resume": Run,

	"POST /api/flows/:flow/runs":             Run,
	"GET /api/flows/:flow/runs":              Read,
	"GET /api/flows/:flow/runs/:run":         ReadRun,
	"POST /api/flows/:flow/runs/:run/cancel": Run,
	"POST /api/flows/:flow/runs/:run/resume": Run,
	"POST /api/flows/:flow/runs/:run/fork":   Run,
	"GET /api/flows/:flow/runs/:run/events":  ReadRun,

	"GET /api/flows/:flow/runs/:run/checkpoints":            ReadState,
	"GET /api/flows/:flow/runs/:run/checkpoints/:ckpt":      ReadState,
	"GET /api/flows/:flow/runs/:run/checkpoints/:ckpt/diff": ReadState,

	"GET /api/flows/:flow/files/:file":         ReadState,
	"GET /api/flows/:flow/files/:file/content": ReadState,
	"DELETE /api/flows/:flow/files/:file":      Run,

	"GET /api/flows/:flow/queues": Read,

	"GET /api/flows/:flow/deadletters":            Read,
	"POST /api/flows/:flow/deadletters/:id/retry": Run,
	"DELETE /api/flows/:flow/deadletters/:id":     Run,

	"GET /api/flows/:flow/hooks":                 Read,
	"GET /api/flows/:flow/deliveries":            Read,
	"POST /api/flows/:flow/deliveries/:id/retry": Run,
	"DELETE /api/flows/:flow/deliveries/:id":     Run,

	// Fixing forward (docs/replay.md) and test cases (docs/testing-flows.md). Cases hold
	// runs' inputs and outputs, and a test's result its runs' outputs: run state.
	"GET /api/flows/:flow/cases":                ReadState,
	"PUT /api/flows/:flow/cases":                Edit,
	"POST /api/flows/:flow/cases":               Edit,
	"POST /api/flows/:flow/cases/run":           Edit,
	"GET /api/flows/:flow/tests":                Read,
	"GET /api/flows/:flow/tests/:version":       ReadState,
	"GET /api/flows/:flow/replays":              Read,
	"GET /api/flows/:flow/replays/:job":         Read,
	"POST /api/flows/:flow/replays":             Run,
	"POST /api/flows/:flow/replays/:job/cancel": Run,
	"GET /api/flows/:flow/runs/:run/compare":    ReadState,
	"POST /api/flows/:flow/runs/:run/move":      Run,
	"POST /api/flows/:flow/runs/move":           Run,
	"POST /api/flows/:flow/runs/:run/replay":    Run,
	"POST /api/flows/:flow/runs/:run/retry":     Run,
}
