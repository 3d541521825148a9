package notify

import (
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Each event kind of the key domain maps to its own notification kind, and
// a kind notify does not know makes no notification.
func TestKindOfEvents(t *testing.T) {
	for ev, want := range map[keystore.EventKind]Kind{
		keystore.EventKeyUnknown:    KindKeyUnknown,
		keystore.EventBreakerOpened: KindBreakerOpened,
		keystore.EventBreakerClosed: KindBreakerClosed,
		keystore.EventParkedLost:    KindParkedLost,
		keystore.EventParkedOverdue: KindParkedOverdue,
		keystore.EventRecordDamaged: KindRecordDamaged,
		keystore.EventRerunRefused:  KindRerunRefused,
	} {
		if got, ok := kindOf(ev); !ok || got != want {
			t.Errorf("kindOf(%s) = %s, %v; want %s", ev, got, ok, want)
		}
	}
	// A narrowed breaker is still open for the namespace whose writes
	// failed: it must not read as breaker_closed ("writes flow again").
	if got, ok := kindOf(keystore.EventBreakerNarrowed); ok {
		t.Errorf("breaker_narrowed made %s", got)
	}
	if got, ok := kindOf("key_resolved_somewhere_new"); ok {
		t.Errorf("an unknown kind made %s", got)
	}
}
