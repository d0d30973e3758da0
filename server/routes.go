package server

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/observe"
	"github.com/sluicehq/sluice/static"
)

// routes is the whole HTTP surface of Sluice. Every route in it is documented in
// openapi.json (a test checks) and docs/api.md.
func (s *Server) routes() {
	e := s.echo
	e.IPExtractor = echo.ExtractIPDirect() // forwarded headers are not trusted
	// /env/NAME/... names an environment before routing (environments.go).
	e.Pre(environmentPath)
	if observe.Enabled() {
		e.Use(s.traceRequests()) // tracing.go
	}
	// Host, Origin and Sec-Fetch-Site are checked before anything else (protect.go).
	e.Use(s.recoverPanics, s.requestLog(), securityHeaders, s.checkHost, s.crossOrigin(), s.bodyDeadline, chooseEnvironment)
	if len(s.cfg.CORSOrigins) > 0 {
		e.Use(s.cors())
	}

	// Health needs no token: load balancers and orchestrators probe it.
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)

	// The webhook ingress authenticates with the flow's own secret instead.
	e.POST("/hooks/:flow", s.hook, s.requireJSON(false))

	// The bundle and style sheet hold no secret: the sign-in page needs them.
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static", static.Handler())))

	// Signing in (signin.go, sso.go): forms with the page's CSRF token.
	e.GET("/signin", s.signinPage)
	e.POST("/signin", s.signin, s.checkCSRF)
	e.GET("/reset", s.resetPage)
	e.POST("/reset", s.reset, s.checkCSRF)
	e.GET("/sso/start", s.ssoStart)
	e.GET("/sso/callback", s.ssoCallback)

	// Everything else needs someone, and what the one permission table (teams.Routes)
	// says their role in the request's workspace allows (auth.go).
	auth := e.Group("", s.authenticate, s.authorize)
	auth.POST("/signout", s.signout, s.checkCSRF)
	auth.GET("/metrics", s.metricsHandler)
	auth.GET("/ws", s.websocket)
	auth.GET("/", s.homePage)
	// Pages (pages.go): the editor island and the server-rendered views.
	auth.GET("/flows/new", s.newFlowPage)
	auth.GET("/flows/:flow", s.editorPage)
	auth.POST("/flows/:flow/duplicate", s.duplicateFlowPage, s.checkCSRF)
	auth.POST("/flows/:flow/delete", s.deleteFlowPage, s.checkCSRF)
	auth.GET("/runs", s.runsPage)
	auth.GET("/flows/:flow/runs/:run", s.runPage)
	auth.GET("/queues", s.queuesPage)
	auth.GET("/members", s.membersPage)
	auth.GET("/keys", s.keysPage)
	auth.GET("/audit", s.auditPage)

	// Flows as MCP tools (mcp.go) and as OpenAI-compatible models (openai.go).
	mcpHandler := s.mcpHandler()
	auth.GET("/mcp", mcpHandler)
	auth.POST("/mcp", mcpHandler)
	auth.DELETE("/mcp", mcpHandler)
	auth.GET("/v1/models", s.listModels)
	auth.GET("/v1/models/:model", s.getModel)
	auth.POST("/v1/chat/completions", s.chatCompletions, s.requireJSON(true))

	// An upload's body is the file itself, not JSON; the X-File-Name header it needs is
	// what keeps other sites' pages out instead (files.go).
	auth.POST("/api/flows/:flow/files", s.uploadFile)

	// Every change through the API is a JSON request (protect.go).
	api := auth.Group("/api", s.requireJSON(true))
	api.GET("/openapi.json", s.openAPI)

	// People, workspaces, keys and the audit log (members.go, audit.go).
	api.GET("/me", s.getMe)
	api.GET("/workspaces", s.listWorkspaces)
	api.POST("/workspaces", s.createWorkspace)
	api.GET("/settings", s.getSettings)
	api.PUT("/settings", s.saveSettings)
	api.GET("/members", s.listMembers)
	api.POST("/members", s.invite)
	api.PUT("/members/:person", s.setMemberRole)
	api.DELETE("/members/:person", s.removeMember)
	api.POST("/members/:person/reset", s.issueReset)
	api.GET("/keys", s.listKeys)
	api.POST("/keys", s.createKey)
	api.DELETE("/keys/:key", s.revokeKey)
	api.GET("/audit", s.listAudit)

	api.GET("/components", s.listComponents)
	api.POST("/mcp/tools", s.listMCPTools)

	api.GET("/flows", s.listFlows)
	api.POST("/flows", s.importFlow)
	api.POST("/flows/validate", s.validateFlow)
	api.GET("/flows/:flow", s.getFlow)
	api.PUT("/flows/:flow", s.saveFlow)
	api.DELETE("/flows/:flow", s.deleteFlow)
	api.GET("/flows/:flow/draft", s.getDraft)
	api.PUT("/flows/:flow/draft", s.saveDraft)
	api.DELETE("/flows/:flow/draft", s.deleteDraft)
	api.GET("/flows/:flow/export", s.exportFlow)
	api.GET("/flows/:flow/events", s.flowEvents)
	api.POST("/flows/:flow/nodes/:node/try", s.tryNode)

	api.GET("/flows/:flow/versions", s.listVersions)
	api.GET("/flows/:flow/versions/:version", s.getVersion)
	api.GET("/flows/:flow/versions/:version/diff", s.diffVersion)
	api.POST("/flows/:flow/rollback", s.rollback)

	// Environments and promotion (environments.go).
	api.GET("/environments", s.getEnvironments)
	api.PUT("/environments", s.setEnvironments)
	api.GET("/flows/:flow/environments", s.flowEnvironments)
	api.POST("/flows/:flow/environments/:env/promote", s.promote)
	api.GET("/flows/:flow/promotions", s.listPromotions)

	// Test cases (cases.go): the cases file beside the flow, runs saved as cases, the
	// cases run on a working copy or a version, each version's last result.
	api.GET("/flows/:flow/cases", s.getCases)
	api.PUT("/flows/:flow/cases", s.saveCases)
	api.POST("/flows/:flow/cases", s.addCase)
	api.POST("/flows/:flow/cases/run", s.runCases)
	api.GET("/flows/:flow/tests", s.listTests)
	api.GET("/flows/:flow/tests/:version", s.getTest)

	api.GET("/flows/:flow/schedules", s.listSchedules)
	api.POST("/flows/:flow/schedules/:schedule/pause", s.pauseSchedule)
	api.POST("/flows/:flow/schedules/:schedule/resume", s.resumeSchedule)

	api.POST("/flows/:flow/runs", s.startRun)
	api.GET("/flows/:flow/runs", s.listRuns)
	api.POST("/flows/:flow/runs/move", s.moveRuns)
	api.POST("/flows/:flow/replays", s.replayRuns)
	api.GET("/flows/:flow/replays", s.listReplayJobs)
	api.GET("/flows/:flow/replays/:job", s.getReplayJob)
	api.POST("/flows/:flow/replays/:job/cancel", s.cancelReplayJob)
	api.GET("/flows/:flow/runs/:run", s.getRun)
	api.POST("/flows/:flow/runs/:run/cancel", s.cancelRun)
	api.POST("/flows/:flow/runs/:run/resume", s.resumeRun)
	api.POST("/flows/:flow/runs/:run/fork", s.forkRun)
	api.POST("/flows/:flow/runs/:run/retry", s.retryRun)
	api.POST("/flows/:flow/runs/:run/move", s.moveRun)
	api.POST("/flows/:flow/runs/:run/replay", s.replayRun)
	api.GET("/flows/:flow/runs/:run/compare", s.compareRuns)
	api.GET("/flows/:flow/runs/:run/events", s.runEvents)

	api.GET("/flows/:flow/runs/:run/checkpoints", s.listCheckpoints)
	api.GET("/flows/:flow/runs/:run/checkpoints/:ckpt", s.getCheckpoint)
	api.GET("/flows/:flow/runs/:run/checkpoints/:ckpt/diff", s.diffCheckpoint)

	api.GET("/flows/:flow/files/:file", s.getFile)
	api.GET("/flows/:flow/files/:file/content", s.fileContent)
	api.DELETE("/flows/:flow/files/:file", s.deleteFile)

	api.GET("/flows/:flow/queues", s.flowQueues)

	api.GET("/flows/:flow/deadletters", s.listDeadLetters)
	api.POST("/flows/:flow/deadletters/:id/retry", s.retryDeadLetter)
	api.DELETE("/flows/:flow/deadletters/:id", s.discardDeadLetter)

	api.GET("/flows/:flow/hooks", s.hookInfo)
	api.GET("/flows/:flow/deliveries", s.listFailedDeliveries)
	api.POST("/flows/:flow/deliveries/:id/retry", s.retryDelivery)
	api.DELETE("/flows/:flow/deliveries/:id", s.discardDelivery)
}
