package engine

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/flows"
)

// The wait before each retry: initial, times the multiplier per attempt since, capped at
// max, then ±20% jitter.
func TestBackoffGrowsByTheMultiplierUpToTheCap(t *testing.T) {
	p := flows.Retry{Initial: flows.Duration(time.Second), Max: flows.Duration(10 * time.Second), Multiplier: 3}
	for _, tc := range []struct {
		name     string
		delivery int
		want     time.Duration
	}{
		{"the first retry waits initial", 1, time.Second},
		{"a delivery count of 0 counts as the first", 0, time.Second},
		{"each further retry waits multiplier times longer", 2, 3 * time.Second},
		{"and again", 3, 9 * time.Second},
		{"the wait stops growing at max", 4, 10 * time.Second},
		{"a huge delivery count stays at max", 10000, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := backoff(p, tc.delivery, 0.5); got != tc.want { // r = 0.5: no jitter
				t.Errorf("backoff after delivery %d = %s, want %s", tc.delivery, got, tc.want)
			}
		})
	}
}

// Jitter spreads each wait over [80%, 120%) of it, the capped wait included, and
// covers the range rather than sitting at one end.
func TestBackoffJitterStaysWithinTwentyPercent(t *testing.T) {
	p := flows.Retry{Initial: flows.Duration(time.Second), Max: flows.Duration(4 * time.Second), Multiplier: 2}
	for _, n := range []int{1, 2, 3, 5} { // 1s, 2s, 4s, 4s (capped)
		base := backoff(p, n, 0.5)
		lo, hi := backoff(p, n, 0), backoff(p, n, 0.999999)
		if lo != base*8/10 {
			t.Errorf("delivery %d: shortest wait %s, want 80%% of %s", n, lo, base)
		}
		if hi >= base*12/10 || hi < base*119/100 {
			t.Errorf("delivery %d: longest wait %s, want just under 120%% of %s", n, hi, base)
		}
		for i := 0; i <= 10; i++ {
			r := float64(i) / 10 * 0.999999
			if d := backoff(p, n, r); d < lo || d > hi {
				t.Errorf("delivery %d, r %.2f: %s outside [%s, %s]", n, r, d, lo, hi)
			}
		}
	}
	if got := backoff(p, 5, 0.999999); got > 4*time.Second*12/10 {
		t.Errorf("a capped wait with jitter is %s, more than 120%% of max", got)
	}
}

// The default policy waits a few seconds in all before the default third attempt dead-
// letters, so a dependency down for a second or two does not lose work (the retry
// table in docs/runtime.md).
func TestDefaultBackoffWaitsAboutThreeSecondsOverThreeAttempts(t *testing.T) {
	p := (*flows.Retry)(nil).WithDefaults(flows.DefaultSettings)
	if p.MaxAttempts != 3 {
		t.Fatalf("default max_attempts %d, want 3", p.MaxAttempts)
	}
	var total, shortest, longest time.Duration
	for n := 1; n < p.MaxAttempts; n++ { // the waits between three attempts
		total += backoff(p, n, 0.5)
		shortest += backoff(p, n, 0)
		longest += backoff(p, n, 0.999999)
	}
	if total != 3*time.Second {
		t.Errorf("default waits add up to %s, want 3s (1s then 2s)", total)
	}
	if shortest < 2*time.Second || longest > 4*time.Second {
		t.Errorf("with jitter the default waits add up to %s..%s, want within 2s..4s", shortest, longest)
	}
}
