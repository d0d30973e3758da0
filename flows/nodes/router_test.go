package nodes_test

import (
	"testing"
)

func TestRouterTakesTheFirstMatchingRouteInWrittenOrder(t *testing.T) {
	// Written zeta first: a router that sorted its routes would try alpha first.
	r := build(t, "router", `{"routes": {"zeta": ".n > 1", "alpha": ".n > 0", "mode": "$state.mode == \"x\""}}`)
	for _, tc := range []struct {
		name, state, want string
	}{
		{"both match: the first written wins", `{"n": 5}`, "zeta"},
		{"only the second matches", `{"n": 1}`, "alpha"},
		{"a route can read $state", `{"n": 0, "mode": "x"}`, "mode"},
		{"nothing matches: default", `{"n": 0}`, "default"},
		{"a missing key is null, which matches nothing", `{}`, "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := run(t, r, state(t, tc.state))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Ports) != 1 || res.Ports[0] != tc.want || res.Output != tc.want {
				t.Errorf("ports %v, output %v; want the %q port", res.Ports, res.Output, tc.want)
			}
			if res.Update != nil {
				t.Errorf("a router changes no state, got update %v", res.Update)
			}
		})
	}
}

func TestRouterFailsPermanentlyOnARouteError(t *testing.T) {
	r := build(t, "router", `{"routes": {"big": ".size.bytes > 10"}}`)
	_, err := run(t, r, state(t, `{"size": "large"}`))
	wantPermanent(t, err, "params.routes.big", "expected an object but got: string")
}

func TestRouterRefusesARouteNamedDefault(t *testing.T) {
	_, err := tryBuild("router", `{"routes": {"default": "true"}}`)
	if err == nil {
		t.Fatal("a route named default was accepted; it would hide the no-match port")
	}
}
