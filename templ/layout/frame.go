package layout

import "context"

// Frame is who is looking at a page, for the top bar: the workspace switcher, who is
// signed in and their role, the sign-out form. The server puts it in the request's
// context, so that no page has to pass it along.
type Frame struct {
	Who        string
	Role       string
	Workspace  string
	Workspaces []string
	CSRF       string // the sign-out form's token
	SignedIn   bool   // a session: offer sign-out
	Teams      bool   // accounts are on (a token is set)
	// Can is what the role may do here, by permission ("edit", "run", ...); Why says why
	// not, for the disabled buttons' titles.
	Can map[string]bool
	Why map[string]string
}

type frameKey struct{}

// WithFrame returns ctx carrying f.
func WithFrame(ctx context.Context, f *Frame) context.Context {
	return context.WithValue(ctx, frameKey{}, f)
}

// FrameOf is the frame in ctx, or nil.
func FrameOf(ctx context.Context) *Frame {
	f, _ := ctx.Value(frameKey{}).(*Frame)
	return f
}

// Allowed reports whether the page's viewer may do perm (true without a frame: the
// single-person mode).
func Allowed(ctx context.Context, perm string) bool {
	f := FrameOf(ctx)
	return f == nil || !f.Teams || f.Can[perm]
}

// WhyNot is the reason perm is not allowed, for a disabled control's title.
func WhyNot(ctx context.Context, perm string) string {
	if f := FrameOf(ctx); f != nil {
		return f.Why[perm]
	}
	return ""
}
