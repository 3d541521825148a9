package slack

import "strings"

// HintOf is what an operator does about a notification's last failure as
// stored ("chat.postMessage: channel_not_found"): the hint the log gave
// when it died, for the pages that show it later ("" when nothing
// specific).
func HintOf(lastFailure string) string {
	reason := lastFailure
	if i := strings.LastIndex(reason, ": "); i >= 0 {
		reason = reason[i+2:]
	}
	return hint(strings.TrimSpace(reason))
}
