package mongostore

import "time"

// SetNotifClaimTTL makes a notifications claim expire after d (instead of
// lockTTL), so a test sees a crashed notice taken over without waiting,
// and returns the undo.
func SetNotifClaimTTL(d time.Duration) func() {
	old := notifClaimTTL
	notifClaimTTL = d
	return func() { notifClaimTTL = old }
}
